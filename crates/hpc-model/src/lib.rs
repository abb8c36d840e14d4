//! hpc-model: reads a batch script (`analyze`), recommends what to request
//! at a stated risk of running out (`recommend`), fits per-tool models
//! (`fit`), replays a history to measure the advice (`backtest`), plans a
//! submission (`plan`, `spool`) and sizes a group's job pool across its
//! SLURM accounts (`pool`: it runs `sacctmgr`, `scontrol` and `squeue`, or
//! reads their recorded output, and says how many jobs can run at once, how
//! many slots are free now and where to send the next job).
//!
//! It reads records (a file or `-`), never the database; `pool` is the one
//! subcommand that asks SLURM itself.
#![deny(missing_docs)]

use argh::FromArgs;
use hpc_core::Result;

pub mod analyze;
pub mod backtest;
pub mod calib;
pub mod fit;
pub mod history;
pub mod lang;
pub mod model;
pub mod nextflow;
pub mod plan;
pub mod pool;
pub mod recommend;
pub mod risk;
pub mod sbatch;
pub mod tools;
pub mod trace;

#[derive(FromArgs, Debug)]
/// Read batch scripts, recommend what to request at a stated risk, backtest
/// the advice, size a group's job pool across its SLURM accounts.
#[argh(
    example = "hpc-model analyze job.sbatch",
    example = "hpc-store dump --kind job,summary,analysis --user $USER | hpc-model recommend job.sbatch --history -",
    note = "Exit status: 0 success, 1 a failure or rejected input lines, 2 usage error."
)]
pub struct Args {
    #[argh(subcommand)]
    cmd: Cmd,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
#[allow(missing_docs)]
#[allow(clippy::large_enum_variant)] // parsed once; boxing does not fit argh
enum Cmd {
    Analyze(analyze::AnalyzeArgs),
    Recommend(recommend::RecommendArgs),
    Fit(fit::FitArgs),
    Backtest(backtest::BacktestArgs),
    Pool(pool::PoolArgs),
    Plan(plan::PlanArgs),
    Spool(plan::SpoolArgs),
}

/// Runs the subcommand the arguments name.
pub fn main_with(args: Args) -> Result<()> {
    match args.cmd {
        Cmd::Analyze(a) => analyze::main_with(a),
        Cmd::Recommend(a) => recommend::main_with(a),
        Cmd::Fit(a) => fit::main_with(a),
        Cmd::Backtest(a) => backtest::main_with(a),
        Cmd::Pool(a) => pool::main_with(a),
        Cmd::Plan(a) => plan::main_with(a),
        Cmd::Spool(a) => plan::spool_main(a),
    }
}
