//! hpc-db: the SQLite history database of hpc-sizer.
//!
//! - [`store`]: the schema and its migrations, job upserts, the other record
//!   kinds, bookkeeping marks, and reading jobs back ([`Store`],
//!   [`JobFilter`]);
//! - [`query`]: every read the tools make, each a named function: what
//!   `status` counts ([`Store::status_counts`]), records back out
//!   ([`Store::dump`]), flags ([`Store::flag_counts`], [`Store::job_flags`]),
//!   a tool's history ([`Store::tool_history`]), a report's sums
//!   ([`Store::report_partials`]) and the jobs for the Parquet export
//!   ([`Store::jobs_by_end`]);
//! - [`report`]: efficiency reports grouped by user, account, group,
//!   partition, node, state or tool ([`Store::report`]);
//! - [`error`]: this crate's error type, which converts into
//!   [`hpc_core::Error`] so that a tool's `?` carries it to `run_main`.
//!
//! Only hpc-ingest, hpc-store and hpc-web (which only reads) use it: the
//! other tools do not compile SQLite, and those write no SQL (the schema
//! and every query live here).
#![deny(missing_docs)]

pub mod error;
pub mod query;
pub mod report;
pub mod store;

pub use error::{Error, Result};
pub use query::{
    FlagCount, GroupKey, JobFlag, JobRow, JobRows, Partial, RawRow, RecordKind, StatusCounts, Sum,
    ToolHistory,
};
pub use store::{
    job_columns, now_epoch, JobColumn, JobFilter, PutError, PutStats, Store, Writer, SCHEMA_VERSION,
};
