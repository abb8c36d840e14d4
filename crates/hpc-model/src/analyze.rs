//! `hpc-model analyze` (skeleton: to be written).

use argh::FromArgs;
use hpc_core::{Error, Result};

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "analyze")]
/// (to be written)
pub struct AnalyzeArgs {}

/// Runs `hpc-model analyze`.
pub fn main_with(_args: AnalyzeArgs) -> Result<()> {
    Err(Error::Usage("hpc-model analyze is not written yet".into()))
}

/// Reads a batch script (and the R or Python script it runs) without
/// running anything. (Skeleton: to be written.)
pub fn analyze(
    script: &std::path::Path,
    _table: &crate::tools::ToolTable,
) -> Result<hpc_core::advice::Analysis> {
    Err(Error::Other(format!(
        "{}: analyze is not written yet",
        hpc_core::paths::shown(script)
    )))
}
