//! hpc-db: the SQLite history database of hpc-sizer.
//!
//! - [`store`]: the schema and its migrations, job upserts, the other record
//!   kinds, bookkeeping marks, and reading jobs back ([`Store`],
//!   [`JobFilter`]);
//! - [`error`]: this crate's error type, which converts into
//!   [`hpc_core::Error`] so that a tool's `?` carries it to `run_main`.
//!
//! Only hpc-ingest and hpc-store use it: the other tools do not compile
//! SQLite.
#![deny(missing_docs)]

pub mod error;
pub mod store;

pub use error::{Error, Result};
pub use store::{
    job_columns, now_epoch, JobColumn, JobFilter, PutError, PutStats, Store, Writer, PARENT_SQL,
    SCHEMA_VERSION, TOOL_SQL,
};
