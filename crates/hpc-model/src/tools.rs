//! The tool table: which tools a script runs, how to recognise them, the
//! memory multiplier of each input file type, and the cold-start sizing of
//! each tool. Built into the binary (`data/tools.csv`, whose comments say
//! where each number comes from); a user file (`--tools FILE`, the same CSV
//! format) extends it through [`ToolTable::load`] and [`ToolTable::extend`].

use std::path::Path;

use hpc_core::paths::shown;
use hpc_core::{Error, IoContext, Result};
use serde::Deserialize;

/// The built-in table.
const BUILTIN: &str = include_str!("../data/tools.csv");

/// The largest tool file read (a table of a few hundred rows is a few KiB).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The tool every script without a known one gets.
pub const GENERIC: &str = "generic";

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

/// An input file type: its extensions and memory multiplier.
#[derive(Debug, Clone, PartialEq)]
pub struct FileType {
    /// The type's name (`rds`, `h5ad`, `fastq`).
    pub name: String,
    /// The file name endings that mark it, lower case (`.fastq.gz`).
    pub extensions: Vec<String>,
    /// How many times its size the data takes in memory once loaded.
    pub mem_factor: f64,
}

/// A tool with what recognises it.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    tool: Tool,
    parent: Option<String>,
    words: Vec<String>,
}

/// The tools and file types known.
#[derive(Debug, Clone, Default)]
pub struct ToolTable {
    entries: Vec<Entry>,
    types: Vec<FileType>,
}

/// One CSV row, before it is checked.
#[derive(Debug, Deserialize)]
struct Row {
    kind: String,
    name: String,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default, rename = "match")]
    words: Option<String>,
    #[serde(default)]
    base_mem_mb: Option<f64>,
    #[serde(default)]
    cpus: Option<u32>,
    #[serde(default)]
    time_s: Option<f64>,
    #[serde(default)]
    mem_factor: Option<f64>,
}

impl ToolTable {
    /// The table built into the binary.
    pub fn builtin() -> ToolTable {
        ToolTable::parse(BUILTIN).expect("the built-in tool table is valid")
    }

    /// Reads a user table (CSV with a header naming its columns: `kind`,
    /// `name`, `language`, `parent`, `match`, `base_mem_mb`, `cpus`,
    /// `time_s`, `mem_factor`; lines starting with `#` are comments).
    pub fn load(path: &Path) -> Result<ToolTable> {
        let f = std::fs::File::open(path).ctx(|| format!("cannot read {}", shown(path)))?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_FILE_BYTES + 1), &mut text)
            .ctx(|| format!("cannot read {}", shown(path)))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::Other(format!(
                "{}: larger than {MAX_FILE_BYTES} bytes: not a tool table",
                shown(path)
            )));
        }
        ToolTable::parse(&text).map_err(|e| Error::Other(format!("{}: {e}", shown(path))))
    }

    /// Parses a table in the CSV format; errors name the line.
    pub fn parse(text: &str) -> std::result::Result<ToolTable, String> {
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let headers = rdr.headers().map_err(|e| e.to_string())?.clone();
        if !headers.iter().any(|h| h == "kind") || !headers.iter().any(|h| h == "name") {
            return Err("the header must name the columns, at least kind and name".into());
        }
        let mut table = ToolTable::default();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| e.to_string())?;
            let line = rec.position().map_or(0, |p| p.line());
            let row: Row = rec
                .deserialize(Some(&headers))
                .map_err(|e| format!("line {line}: {e}"))?;
            table.add(row).map_err(|e| format!("line {line}: {e}"))?;
        }
        Ok(table)
    }

    /// Adds one checked row (replacing a row of the same kind and name).
    fn add(&mut self, row: Row) -> std::result::Result<(), String> {
        let words = split_list(row.words.as_deref());
        let name = row.name;
        if name.is_empty() {
            return Err("empty name".into());
        }
        match row.kind.as_str() {
            "tool" => {
                let base = row
                    .base_mem_mb
                    .filter(|m| m.is_finite() && *m > 0.0)
                    .ok_or_else(|| format!("tool {name}: needs a positive base_mem_mb"))?;
                if row.time_s.is_some_and(|t| !(t.is_finite() && t > 0.0)) {
                    return Err(format!("tool {name}: time_s must be positive"));
                }
                let entry = Entry {
                    tool: Tool {
                        name,
                        language: row.language.filter(|l| !l.is_empty()),
                        base_mem_mb: base,
                        cpus: row.cpus.filter(|c| *c > 0),
                        time_s: row.time_s,
                    },
                    parent: row.parent.filter(|p| !p.is_empty()),
                    words,
                };
                self.extend_entries(entry);
            }
            "type" => {
                let factor = row
                    .mem_factor
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .ok_or_else(|| format!("type {name}: needs a mem_factor >= 0"))?;
                if words.is_empty() {
                    return Err(format!("type {name}: needs its extensions in match"));
                }
                let ty = FileType {
                    name,
                    extensions: words.iter().map(|w| w.to_lowercase()).collect(),
                    mem_factor: factor,
                };
                match self.types.iter_mut().find(|t| t.name == ty.name) {
                    Some(t) => *t = ty,
                    None => self.types.push(ty),
                }
            }
            other => return Err(format!("kind '{other}': not tool or type")),
        }
        Ok(())
    }

    fn extend_entries(&mut self, entry: Entry) {
        match self
            .entries
            .iter_mut()
            .find(|e| e.tool.name == entry.tool.name)
        {
            Some(e) => *e = entry,
            None => self.entries.push(entry),
        }
    }

    /// Adds the rows of `other`; a tool or type of the same name is replaced.
    pub fn extend(&mut self, other: ToolTable) {
        for e in other.entries {
            self.extend_entries(e);
        }
        for t in other.types {
            match self.types.iter_mut().find(|x| x.name == t.name) {
                Some(x) => *x = t,
                None => self.types.push(t),
            }
        }
    }

    /// The tool of that name, if the table knows it.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.entries
            .iter()
            .find(|e| e.tool.name == name)
            .map(|e| &e.tool)
    }

    /// Every tool, in table order.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.entries.iter().map(|e| &e.tool)
    }

    /// The type of a file from its name: the longest matching extension,
    /// case-insensitive; among equal ones the type added last (a user's).
    pub fn file_type(&self, path: &str) -> Option<&FileType> {
        let lower = path.to_lowercase();
        let mut best: Option<(&FileType, usize)> = None;
        for t in &self.types {
            for ext in &t.extensions {
                if lower.ends_with(ext.as_str()) && best.map_or(true, |(_, n)| ext.len() >= n) {
                    best = Some((t, ext.len()));
                }
            }
        }
        best.map(|(t, _)| t)
    }

    /// The tools named on one line of code, in table order.
    pub fn tools_in<'a>(&'a self, line: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .iter()
            .filter(|e| e.words.iter().any(|w| contains_word(line, w)))
            .map(|e| e.tool.name.as_str())
    }

    /// The primary tool among those found: the heaviest (largest
    /// `base_mem_mb`) of them, a function counting as its parent; the first
    /// found among equals; [`GENERIC`] when none was found.
    pub fn primary(&self, found: &[String]) -> String {
        let mut best: Option<&Tool> = None;
        for name in found {
            let Some(entry) = self.entries.iter().find(|e| &e.tool.name == name) else {
                continue;
            };
            let head = entry
                .parent
                .as_deref()
                .and_then(|p| self.tool(p))
                .unwrap_or(&entry.tool);
            if best.map_or(true, |b| head.base_mem_mb > b.base_mem_mb) {
                best = Some(head);
            }
        }
        best.map_or_else(|| GENERIC.to_string(), |t| t.name.clone())
    }
}

/// `a|b|c` as a list, empty parts dropped.
fn split_list(s: Option<&str>) -> Vec<String> {
    s.unwrap_or("")
        .split('|')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// True when `word` occurs in `hay` with no letter, digit or `_` glued to
/// either end of it (where that end of the word is itself such a character).
fn contains_word(hay: &str, word: &str) -> bool {
    let first = word.chars().next().is_some_and(is_ident);
    let last = word.chars().next_back().is_some_and(is_ident);
    hay.match_indices(word).any(|(i, _)| {
        let before = hay[..i].chars().next_back().is_some_and(is_ident);
        let after = hay[i + word.len()..].chars().next().is_some_and(is_ident);
        !((first && before) || (last && after))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_knows_the_issue_tools_and_types() {
        let t = ToolTable::builtin();
        for name in [
            "seurat",
            "sctransform",
            "findmarkers",
            "scanpy",
            "cellranger",
            "qupath",
            "star",
            "bwa",
            "samtools",
            "gatk",
            GENERIC,
        ] {
            assert!(t.tool(name).is_some(), "{name}");
        }
        let f = |p: &str| t.file_type(p).map(|t| (t.name.as_str(), t.mem_factor));
        assert_eq!(f("a/pbmc.rds"), Some(("rds", 2.5)));
        assert_eq!(f("x.H5AD"), Some(("h5ad", 1.5)));
        assert_eq!(f("r1.fastq.gz"), Some(("fastq", 0.0)));
        assert_eq!(f("counts.tsv.gz"), Some(("csv.gz", 8.0)));
        assert_eq!(f("notes.docx"), None);
        assert_eq!(t.tool("star").unwrap().base_mem_mb, 32768.0);
    }

    #[test]
    fn words_match_whole() {
        assert!(contains_word("STAR --runThreadN 8", "STAR"));
        assert!(!contains_word("echo START", "STAR"));
        assert!(contains_word("library(Seurat)", "Seurat"));
        assert!(!contains_word("library(SeuratObject)", "Seurat"));
        assert!(contains_word("/opt/bwa-mem2 mem", "bwa"));
        assert!(contains_word("x <- Seurat::Read10X(d)", "Seurat"));
    }

    #[test]
    fn the_primary_tool_is_the_heaviest_package() {
        let t = ToolTable::builtin();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(t.primary(&s(&["sctransform"])), "seurat");
        assert_eq!(t.primary(&s(&["samtools", "star"])), "star");
        assert_eq!(t.primary(&[]), GENERIC);
    }

    #[test]
    fn bad_rows_name_their_line() {
        let e = ToolTable::parse("kind,name,base_mem_mb\ntool,a,100\ntool,b,\n").unwrap_err();
        assert!(e.starts_with("line 3:") && e.contains("base_mem_mb"), "{e}");
        let e = ToolTable::parse("kind,name\nfoo,a\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("'foo'"), "{e}");
        let e = ToolTable::parse("kind,name,match,mem_factor\ntype,x,.x,-1\n").unwrap_err();
        assert!(e.contains("mem_factor"), "{e}");
        assert!(
            ToolTable::parse("tool,a,1\n").is_err(),
            "a header is needed"
        );
    }

    #[test]
    fn extend_replaces_same_names_and_adds_new_ones() {
        let mut t = ToolTable::builtin();
        let user = ToolTable::parse(
            "kind,name,language,match,base_mem_mb,mem_factor\n\
             tool,star,bash,STAR,40000,\n\
             tool,kraken2,bash,kraken2,60000,\n\
             type,myrds,,.rds,,3\n",
        )
        .unwrap();
        let n = t.tools().count();
        t.extend(user);
        assert_eq!(t.tools().count(), n + 1);
        assert_eq!(t.tool("star").unwrap().base_mem_mb, 40000.0);
        assert_eq!(t.tool("kraken2").unwrap().language.as_deref(), Some("bash"));
        assert_eq!(t.file_type("a.rds").unwrap().mem_factor, 3.0);
    }
}
