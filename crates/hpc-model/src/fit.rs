//! `hpc-model fit` (skeleton: to be written).

use argh::FromArgs;
use hpc_core::{Error, Result};

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "fit")]
/// (to be written)
pub struct FitArgs {}

/// Runs `hpc-model fit`.
pub fn main_with(_args: FitArgs) -> Result<()> {
    Err(Error::Usage("hpc-model fit is not written yet".into()))
}
