//! `hpc-model recommend` (skeleton: to be written).

use argh::FromArgs;
use hpc_core::{Error, Result};

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "recommend")]
/// (to be written)
pub struct RecommendArgs {}

/// Runs `hpc-model recommend`.
pub fn main_with(_args: RecommendArgs) -> Result<()> {
    Err(Error::Usage("hpc-model recommend is not written yet".into()))
}
