//! The tool table: which tools a script runs, how to recognise them, the
//! memory multiplier of each input file type, and the cold-start sizing of
//! each tool. Built into the binary; a user file (`--tools FILE`) extends it.
//!
//! (Skeleton: the analyze engineer owns this module and writes the table
//! and its loading; the recommend engineer reads a tool's cold-start fields
//! through [`ToolTable::tool`].)

/// One tool of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The tool's name as records carry it (`seurat`, `star`, `generic`).
    pub name: String,
    /// The language it is used from (`R`, `Python`, `bash`).
    pub language: Option<String>,
    /// Cold start: memory a run takes before its inputs, MiB.
    pub base_mem_mb: f64,
    /// Cold start: CPUs a run uses well.
    pub cpus: Option<u32>,
    /// Cold start: a typical time limit, seconds.
    pub time_s: Option<f64>,
}

/// The tools and file types known.
#[derive(Debug, Clone, Default)]
pub struct ToolTable {
    tools: Vec<Tool>,
}

impl ToolTable {
    /// The tool of that name, if the table knows it.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

impl ToolTable {
    /// The table built into the binary. (Skeleton: empty until written.)
    pub fn builtin() -> ToolTable {
        ToolTable::default()
    }
}
