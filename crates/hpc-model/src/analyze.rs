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
