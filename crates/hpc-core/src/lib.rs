//! hpc-core: what the hpc-sizer tools share.
//!
//! - [`fields`]: the field tables that [`record`] declares its records with;
//! - [`record`]: the record types (`job`, `sample`, `meta`, `summary`,
//!   `flag`) that travel between the tools as NDJSON;
//! - [`advice`]: the sizing records (`analysis`, `rec`, `backtest`);
//! - [`input`]: the one input loop of the tools (files or `-`, numbered
//!   lines, rejects, the truncated last line), from raw lines to typed
//!   records;
//! - [`ndjson`]: numbered line reading and reject reporting;
//! - [`cli`]: argument parsing with the shared exit codes;
//! - [`csvio`]: CSV output of records;
//! - [`slurm`]: parsing of SLURM values (memory, durations, timestamps,
//!   job ids, states, TRES);
//! - [`paths`]: default locations and private, atomic writes;
//! - [`num`]: rounding of written values, sums of values that may be absent;
//! - [`table`]: the terminal tables (aligned columns, one number form per
//!   column, `_` between thousands, `-` for a missing value);
//! - [`error`]: the error type, exit codes and [`run_main`].
//!
//! The SQLite history database is the separate crate `hpc-db`, so that the
//! tools that do not use it do not compile SQLite.
#![deny(missing_docs)]

pub mod advice;
pub mod cli;
pub mod csvio;
pub mod error;
pub mod fields;
pub mod input;
pub mod ndjson;
pub mod num;
pub mod paths;
pub mod record;
pub mod slurm;
pub mod table;

pub use error::{run_main, Error, Exit, IoContext, Result};
