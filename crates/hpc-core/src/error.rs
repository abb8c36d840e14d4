//! The shared error type, exit codes and the `run_main` wrapper every binary uses.

use std::io;
use std::process::ExitCode;

/// Errors raised by the core library and the tools.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What the tool was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Wrong arguments or options.
    #[error("{0}")]
    Usage(String),
    /// Some input lines were rejected (each was already reported on stderr).
    #[error("{rejected} of {total} input lines rejected")]
    Rejected {
        /// How many lines were rejected.
        rejected: u64,
        /// How many lines were read.
        total: u64,
    },
    /// Any other failure, described in one line.
    #[error("{0}")]
    Other(String),
    /// A failure of the history database (hpc-db builds it from a SQLite
    /// error, boxed so that this crate does not depend on SQLite).
    #[error("database: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// The context of an `io::Error` turned into an [`Error`] by `?` alone,
/// with nothing said of what was done (a caller may name it better).
pub const BARE_IO: &str = "i/o";

impl From<io::Error> for Error {
    fn from(source: io::Error) -> Self {
        Error::Io {
            context: BARE_IO.into(),
            source,
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            return Error::from(io::Error::from(e));
        }
        Error::Other(format!("json: {e}"))
    }
}

impl From<csv::Error> for Error {
    fn from(e: csv::Error) -> Self {
        if e.is_io_error() {
            if let csv::ErrorKind::Io(io) = e.into_kind() {
                return Error::from(io);
            }
            return Error::Other("csv i/o error".into());
        }
        Error::Other(format!("csv: {e}"))
    }
}

/// Result with the core error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds a context string to I/O errors.
pub trait IoContext<T> {
    /// Wraps an `io::Error` with what was being done.
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: context(),
            source,
        })
    }
}

/// Process exit codes shared by every tool (documented in each man page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Everything went well.
    Success = 0,
    /// Bad data (some lines rejected) or a runtime failure.
    Failure = 1,
    /// A usage error: unknown flag, bad option value.
    Usage = 2,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

impl Error {
    /// True when any cause in the chain is a broken pipe (the reader went away).
    pub fn is_broken_pipe(&self) -> bool {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if let Some(io) = e.downcast_ref::<io::Error>() {
                if io.kind() == io::ErrorKind::BrokenPipe {
                    return true;
                }
            }
            cur = e.source();
        }
        false
    }

    /// The exit code this error maps to.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) => Exit::Usage,
            _ => Exit::Failure,
        }
    }
}

/// Writes one line to stderr, best effort: a stderr that cannot be written
/// (`2>/dev/full`, a closed terminal) must not panic a tool, whose exit code
/// still tells what happened. Control characters in the message are
/// written escaped (see [`crate::paths::escaped`]): a message quotes input
/// (a job name, a field sacct printed), and a newline or an escape code in
/// it must neither forge a line nor drive the terminal. Use it instead of
/// `eprintln!`.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        $crate::error::write_note(&::std::format!($($arg)*));
    }};
}

/// What [`note!`] writes: `message`, escaped, as one line on stderr.
pub fn write_note(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        crate::paths::escaped(message)
    );
}

/// Runs a tool's result through the shared error handling: prints the error
/// as one `tool: message` line on stderr and picks the exit code. A broken
/// pipe exits 0 quietly, since `tool | head` is normal use.
pub fn run_main<T>(tool: &str, result: Result<T>) -> ExitCode {
    match result {
        Ok(_) => Exit::Success.into(),
        Err(e) if e.is_broken_pipe() => Exit::Success.into(),
        Err(e) => {
            crate::note!("{tool}: {e}");
            e.exit().into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipe_is_found_in_the_chain() {
        let e = Error::Io {
            context: "writing".into(),
            source: io::Error::new(io::ErrorKind::BrokenPipe, "gone"),
        };
        assert!(e.is_broken_pipe());
        let j: Error = serde_json::Error::io(io::Error::new(io::ErrorKind::BrokenPipe, "x")).into();
        assert!(j.is_broken_pipe());
        assert!(!Error::Other("x".into()).is_broken_pipe());
    }

    #[test]
    fn usage_errors_exit_2() {
        assert_eq!(Error::Usage("bad".into()).exit(), Exit::Usage);
        assert_eq!(
            Error::Rejected {
                rejected: 1,
                total: 2
            }
            .exit(),
            Exit::Failure
        );
    }
}
