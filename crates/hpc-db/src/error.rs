//! The error type of the database functions.
//!
//! It holds either a SQLite failure or one of the shared
//! [`hpc_core::Error`]s (I/O, usage, bad input) met along the way, and both
//! convert with `?`: into it, and out of it into [`hpc_core::Error`], where a
//! SQLite failure becomes [`hpc_core::Error::Database`] with the same
//! `database: ...` message.

use std::io;

/// A failure of the history database, or of the work around it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite failed: locked past the busy timeout, read-only, full, corrupt.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Any other failure, as the shared error type.
    #[error(transparent)]
    Core(#[from] hpc_core::Error),
}

/// Result with this crate's error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failure described in one line ([`hpc_core::Error::Other`]).
    pub fn other(message: impl Into<String>) -> Self {
        Error::Core(hpc_core::Error::Other(message.into()))
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Core(e.into())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Core(e.into())
    }
}

impl From<Error> for hpc_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Sqlite(e) => hpc_core::Error::Database(Box::new(e)),
            Error::Core(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_failures_keep_their_message_in_the_shared_type() {
        let e = rusqlite::Connection::open_in_memory()
            .unwrap()
            .execute_batch("SELECT * FROM nowhere")
            .unwrap_err();
        let ours = Error::from(e);
        let shown = ours.to_string();
        assert!(shown.starts_with("database: no such table"), "{shown}");
        let core = hpc_core::Error::from(ours);
        assert_eq!(core.to_string(), shown);
        assert_eq!(core.exit(), hpc_core::Exit::Failure);
    }

    #[test]
    fn shared_errors_pass_through_unchanged() {
        let usage = Error::from(hpc_core::Error::Usage("bad".into()));
        assert_eq!(hpc_core::Error::from(usage).exit(), hpc_core::Exit::Usage);
        let pipe = Error::from(io::Error::new(io::ErrorKind::BrokenPipe, "gone"));
        assert!(hpc_core::Error::from(pipe).is_broken_pipe());
    }
}
