//! `hpc-model backtest` (skeleton: to be written).

use argh::FromArgs;
use hpc_core::{Error, Result};

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "backtest")]
/// (to be written)
pub struct BacktestArgs {}

/// Runs `hpc-model backtest`.
pub fn main_with(_args: BacktestArgs) -> Result<()> {
    Err(Error::Usage("hpc-model backtest is not written yet".into()))
}
