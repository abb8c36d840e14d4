//! The helpers every tool's `tests/cli.rs` used to copy: run the real
//! binary with some stdin ([`Tool::cli`], [`Tool::feed`]), check that each
//! long flag its `--help` names is documented in its man page
//! ([`Tool::assert_help_in_man`]), read the first line of its output and
//! close the pipe ([`first_line`], [`Tool::closed_pipe`]), and send its
//! streams to `/dev/full` ([`status_to`]); read NDJSON output ([`records`],
//! [`num`]); run a tool on a history database ([`Tool::db_command`],
//! [`Tool::run_db`]) or with no history at all ([`Tool::cli_without_db`]);
//! build a job whose every field differs from the default
//! ([`distinct_job`]); generate realistic sacct text ([`sacct_gen`]) and
//! uniform and normal test data ([`rng`]).
//!
//! A dev-dependency only: `publish = false`, never linked into a tool.

pub mod rng;
pub mod sacct_gen;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};

/// A tool under test: its built binary, as `env!("CARGO_BIN_EXE_<tool>")`
/// gives it.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    bin: &'static str,
}

impl Tool {
    /// The tool whose binary is `bin`.
    pub const fn new(bin: &'static str) -> Tool {
        Tool { bin }
    }

    /// The binary's path.
    pub fn bin(&self) -> &'static str {
        self.bin
    }

    /// The tool's name: its binary's file name.
    pub fn name(&self) -> &'static str {
        Path::new(self.bin)
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a binary path ends in a name")
    }

    /// A command for the binary with `args`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.bin);
        c.args(args);
        c
    }

    /// Runs the binary with `args` and `stdin`; returns (exit code or -1
    /// on a signal, stdout, stderr).
    pub fn cli(&self, args: &[&str], stdin: &str) -> (i32, String, String) {
        let out = feed(&mut self.command(args), stdin.as_bytes());
        (
            out.status.code().unwrap_or(-1),
            text(&out.stdout),
            text(&out.stderr),
        )
    }

    /// Runs the binary with `args`, `stdin` and piped stdout and stderr.
    pub fn feed(&self, args: &[&str], stdin: &[u8]) -> Output {
        feed(&mut self.command(args), stdin)
    }

    /// Runs the binary with `args`, `stdin` and no history database
    /// (`HPC_SIZER_DB` names a path that cannot exist); returns (exit code
    /// or -1 on a signal, stdout, stderr).
    pub fn cli_without_db(&self, args: &[&str], stdin: &str) -> (i32, String, String) {
        let mut c = self.command(args);
        let out = feed(
            c.env("HPC_SIZER_DB", "/nonexistent/hpc-sizer.db"),
            stdin.as_bytes(),
        );
        (
            out.status.code().unwrap_or(-1),
            text(&out.stdout),
            text(&out.stderr),
        )
    }

    /// A command for `TOOL --db DB ARGS` that sees no group file of the
    /// user's: `HPC_SIZER_GROUPS` is unset and the config folder is the
    /// database's.
    pub fn db_command(&self, db: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(self.bin);
        c.arg("--db").arg(db).args(args);
        c.env_remove("HPC_SIZER_GROUPS");
        if let Some(dir) = db.parent() {
            c.env("XDG_CONFIG_HOME", dir);
        }
        c
    }

    /// Runs [`Tool::db_command`] with `stdin` written from a thread (see
    /// [`feed`]) and stdout and stderr piped; whatever its exit.
    pub fn run_db(&self, db: &Path, args: &[&str], stdin: &[u8]) -> Output {
        feed(&mut self.db_command(db, args), stdin)
    }

    /// [`Tool::run_db`] that must exit 0.
    pub fn run_db_ok(&self, db: &Path, args: &[&str], stdin: &[u8]) -> Output {
        let o = self.run_db(db, args, stdin);
        assert!(o.status.success(), "{args:?}: {}", show(&o));
        o
    }

    /// The `--help` text after `args` (a subcommand); it must exit 0.
    pub fn help(&self, args: &[&str]) -> String {
        let out = self
            .command(args)
            .arg("--help")
            .output()
            .expect("run --help");
        assert!(out.status.success(), "{}", show(&out));
        text(&out.stdout)
    }

    /// The roff source of `man/<tool>.1`.
    pub fn man_page(&self) -> String {
        let path = man_dir().join(format!("{}.1", self.name()));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    /// Asserts that every long flag named in `help` is documented in the
    /// tool's man page (see [`man_documents_flag`]); returns the flags
    /// found, one per mention, for the caller to check their number.
    pub fn assert_help_in_man(&self, help: &str) -> Vec<String> {
        let man = self.man_page();
        let flags = long_flags(help);
        for f in &flags {
            assert!(
                man_documents_flag(&man, f),
                "--{f} is in --help but not in man/{}.1",
                self.name()
            );
        }
        flags
    }

    /// Runs the binary with `feeder` writing its stdin, reads the first
    /// line of its output and closes the pipe: the tool must then exit 0
    /// with nothing on stderr (a closed pipe is normal use, not an
    /// error). Returns that first line.
    pub fn closed_pipe(
        &self,
        args: &[&str],
        feeder: impl FnOnce(ChildStdin) + Send + 'static,
    ) -> String {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the tool");
        let sin = child.stdin.take().expect("piped stdin");
        let w = std::thread::spawn(move || feeder(sin));
        let line = first_line(&mut child);
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("piped stderr")
            .read_to_string(&mut err)
            .expect("read stderr");
        let status = child.wait().expect("wait for the tool");
        w.join().expect("the stdin feeder");
        assert_eq!(status.code(), Some(0), "{err}");
        assert_eq!(err, "");
        line
    }
}

/// Runs `cmd` with `stdin` written from a thread (so a tool that fails
/// before reading it cannot block the test) and stdout and stderr piped.
pub fn feed(cmd: &mut Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the tool");
    let mut sin = child.stdin.take().expect("piped stdin");
    let data = stdin.to_vec();
    let w = std::thread::spawn(move || {
        let _ = sin.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for the tool");
    w.join().expect("the stdin feeder");
    out
}

/// Runs `cmd` with `stdin` and its stdout and stderr written to the files
/// `stdout` and `stderr` (`/dev/full` for a stream that cannot be
/// written); returns its exit code.
pub fn status_to(
    cmd: &mut Command,
    stdin: impl Into<Stdio>,
    stdout: &str,
    stderr: &str,
) -> Option<i32> {
    cmd.stdin(stdin)
        .stdout(writable(stdout))
        .stderr(writable(stderr))
        .status()
        .expect("run the tool")
        .code()
}

/// Reads the first line of a child's piped stdout (without its newline)
/// and closes the pipe.
pub fn first_line(child: &mut Child) -> String {
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the first line");
    drop(stdout);
    line.truncate(line.trim_end_matches('\n').len());
    line
}

/// Bytes as text, invalid UTF-8 replaced.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run's status, stdout and stderr, for an assertion's message.
pub fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The records of NDJSON text, one a line; panics on a line that is not
/// JSON.
pub fn records(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// The number `v[k]`; panics, showing `v`, when it is absent or not a
/// number.
pub fn num(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("no number {k} in {v}"))
}

/// A job whose every field holds a value of its own, none the default:
/// a field lost or two swapped on a round trip show.
pub fn distinct_job() -> hpc_core::record::Job {
    use hpc_core::fields::{Kind, Value};
    let mut j = hpc_core::record::Job::default();
    for (i, c) in hpc_core::record::Job::COLUMNS.iter().enumerate() {
        let text = match c.field.kind {
            Kind::Time => format!("2026-02-{:02}T{:02}:00:00Z", 1 + i, i),
            _ => format!("{}-{i}", c.field.name),
        };
        let v = match c.field.kind {
            Kind::Text | Kind::Time => Value::Text(Some(&text)),
            Kind::Int => Value::Int(Some(100 + i as i64)),
            Kind::Real => Value::Real(Some(i as f64 + 0.25)),
            Kind::Bool => Value::Bool(true),
        };
        (c.set)(&mut j, v).expect("a value of the field's kind");
    }
    j
}

/// The workspace's `man` folder.
pub fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../man")
}

/// The long flags a help text names (`--name`, without the dashes), one
/// per mention, wherever they stand: option lines, usage, examples and
/// notes. A lone `--` (end of options) is not a flag.
pub fn long_flags(help: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for (i, _) in help.match_indices("--") {
        let before = help[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = help[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            flags.push(name);
        }
    }
    flags
}

/// Whether a man page's roff source (man(7) macros) documents the long
/// flag `name`: as `\-\-name` with every dash escaped, as roff wants
/// for a dash that must stay a hyphen-minus. The name must end there:
/// `--max` is not documented by `--max-gap`.
pub fn man_documents_flag(man: &str, name: &str) -> bool {
    has_flag(man, &format!("\\-\\-{}", name.replace('-', "\\-")))
}

/// Whether `flag` stands in `text` not followed by more of a flag name.
fn has_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        let rest = &text[i + flag.len()..];
        !(rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            || rest.starts_with("\\-"))
    })
}

fn writable(path: &str) -> File {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_flags_are_found_anywhere_but_not_inside_words() {
        let help = "Usage: t [--db <db>] [-o FILE]\n  --max-interval  x (default 1)\n  \
                    --help, -h\nafter `--`; e.g. t --set a=1 | u; not a--b nor ---x";
        assert_eq!(long_flags(help), ["db", "max-interval", "help", "set"]);
    }

    #[test]
    fn a_flag_is_documented_in_man_7_form_only() {
        assert!(man_documents_flag(".B \\-\\-max\\-gap\n", "max-gap"));
        assert!(man_documents_flag("\\fB\\-\\-max\\-gap\\fR,", "max-gap"));
        assert!(man_documents_flag(
            ".BI \\-\\-max\\-gap \" s\"\n",
            "max-gap"
        ));
        assert!(!man_documents_flag("--max-gap\n", "max-gap"), "unescaped");
        assert!(!man_documents_flag(".B \\-\\-max-gap\n", "max-gap"), "half");
        assert!(
            !man_documents_flag(".It Fl \\-max\\-gap Ar s\n", "max-gap"),
            "mdoc"
        );
        assert!(!man_documents_flag(".B \\-\\-max\\-gap\n", "max"));
        assert!(!man_documents_flag(".B \\-\\-max_gap\n", "max"));
        assert!(!man_documents_flag(".B \\-\\-grid\n", "max-gap"));
    }
}
