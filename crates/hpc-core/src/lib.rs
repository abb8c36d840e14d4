//! hpc-core: what the hpc-sizer tools share.
//!
//! - [`record`]: the record types (`job`, `sample`, `meta`, `summary`,
//!   `flag`) that travel between the tools as NDJSON;
//! - [`ndjson`]: numbered line reading and reject reporting;
//! - [`cli`]: argument parsing with the shared exit codes;
//! - [`csvio`]: CSV output of records;
//! - [`slurm`]: parsing of SLURM values (memory, durations, timestamps,
//!   job ids, states, TRES);
//! - [`paths`]: default locations and private, atomic writes;
//! - [`error`]: the error type, exit codes and [`run_main`];
//! - `store` (feature `sqlite`): the SQLite history database.
#![deny(missing_docs)]

pub mod cli;
pub mod csvio;
pub mod error;
pub mod ndjson;
pub mod paths;
pub mod record;
pub mod slurm;
#[cfg(feature = "sqlite")]
pub mod store;

pub use error::{run_main, Error, Exit, IoContext, Result};
