//! The one input loop of the tools: files or `-`, numbered lines, bad
//! lines rejected with their place, the truncated last line.
//!
//! Every tool that reads NDJSON records (or, like hpc-ingest, any text a
//! line at a time) takes its inputs the same way, and this module is that
//! way, written once:
//!
//! - [`Inputs`]: the file names of the command line in the order given;
//!   none means stdin, `-` means stdin (at most once: a second `-` is a
//!   usage error). A file is opened when its turn comes (`cannot open
//!   NAME: ...`, exit 1).
//! - Each input is read with [`LineReader`]: lines are numbered from 1 in
//!   each input, and a line that is not valid UTF-8 or longer than
//!   [`MAX_LINE`](crate::ndjson::MAX_LINE) (16 MiB) is rejected through
//!   [`Rejects`] as `tool: FILE: line N: reason` and skipped; the lines
//!   after it are read as usual. Blank lines are skipped. A read error
//!   stops the run (`cannot read NAME: ...`).
//! - Every other line reaches the caller as a [`Line`]: its text (without
//!   the line ending), number, input and whether it lacked its final
//!   newline. [`Line::reject`] reports it, [`Line::bad_record`] reports a
//!   line that did not parse, except the start of a record cut off at the
//!   end of an input (what a writer killed mid-line leaves), which is only
//!   warned about.
//!
//! Three levels, from raw lines to typed records:
//!
//! - [`for_each_line`]: every line of every input (hpc-flags, hpc-store
//!   `put`); [`Inputs::for_each`] and [`Input::for_each_line`] do the same
//!   one input at a time for tools that keep state per input (hpc-ingest's
//!   pending job); [`Input::for_each_raw_line`] hands over the bytes before
//!   the UTF-8 check, for a parser of bytes that checks only the lines it
//!   reads as text (hpc-merge's sample fast path, on several threads);
//! - [`for_each_record`]: every line that is a JSON object with a string
//!   `kind`, with that kind; a line that is not is rejected (`not a record:
//!   ...`, `no "kind"`);
//! - [`for_each_typed`]: every record of one kind, deserialised into a
//!   record type (`kind` itself is not a field of the type); a record that
//!   does not fit is rejected as `bad KIND: reason`.
//!
//! The caller ends the run with [`Rejects::finish`], which turns rejected
//! lines into exit status 1. A reader of samples, for example:
//!
//! ```
//! use hpc_core::input::{for_each_typed, Inputs};
//! use hpc_core::ndjson::Rejects;
//! use hpc_core::record::Meta;
//!
//! let stdin = &b"{\"kind\":\"meta\",\"job_id\":\"7\",\"host\":\"n1\",\"start\":1.0,\
//!     \"interval_s\":1.0,\"probe_version\":\"x\"}\nnot json\n"[..];
//! let inputs = Inputs::new(Vec::new())?; // no names: stdin
//! let mut rejects = Rejects::new("hpc-doc");
//! let mut hosts = Vec::new();
//! let lines = for_each_typed(&inputs, stdin, &mut rejects, "meta", |_, meta: Meta, _| {
//!     hosts.push(meta.host);
//!     Ok(())
//! })?;
//! assert_eq!((hosts, lines, rejects.rejected), (vec!["n1".to_string()], 2, 1));
//! assert!(rejects.finish(lines).is_err()); // exit status 1
//! # Ok::<(), hpc_core::Error>(())
//! ```

use std::borrow::Cow;
use std::io::{self, BufRead};
use std::path::Path;

use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::{Error, Result};
use crate::ndjson::{LineReader, Rejects};
use crate::paths::shown;

/// The input name that means standard input.
pub const STDIN: &str = "-";

/// The inputs of a run: file names in the order given, [`STDIN`] (`-`)
/// for standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    names: Vec<String>,
}

impl Inputs {
    /// The inputs named on the command line: none means stdin alone. `-`
    /// given twice is a usage error (stdin cannot be read twice).
    pub fn new(names: Vec<String>) -> Result<Inputs> {
        if names.iter().filter(|n| *n == STDIN).count() > 1 {
            return Err(Error::Usage("stdin (-) given twice".into()));
        }
        if names.is_empty() {
            return Ok(Inputs {
                names: vec![STDIN.into()],
            });
        }
        Ok(Inputs { names })
    }

    /// The names, in the order they are read (`-` for stdin).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether stdin is one of the inputs.
    pub fn reads_stdin(&self) -> bool {
        self.names.iter().any(|n| n == STDIN)
    }

    /// Opens each input in turn, in the order given, and hands it to
    /// `each`; `stdin` is what `-` reads. A file is opened only when the
    /// inputs before it are done, and one that cannot be opened stops the
    /// run with `cannot open NAME: reason`.
    pub fn for_each<'s>(
        &self,
        stdin: impl BufRead + 's,
        mut each: impl FnMut(Input<'s>) -> Result<()>,
    ) -> Result<()> {
        let mut stdin = Some(stdin);
        for name in &self.names {
            let input = if name == STDIN {
                // `new` refuses a second `-`.
                let s = stdin
                    .take()
                    .ok_or_else(|| Error::Usage("stdin (-) given twice".into()))?;
                Input::new(STDIN, s)
            } else {
                Input::open(name)?
            };
            each(input)?;
        }
        Ok(())
    }
}

/// One input, open for reading.
pub struct Input<'a> {
    name: String,
    reader: Box<dyn BufRead + 'a>,
}

impl<'a> Input<'a> {
    /// An input read from `reader`; `name` is [`STDIN`] or the file's name,
    /// shown (escaped) in messages.
    pub fn new(name: &str, reader: impl BufRead + 'a) -> Input<'a> {
        Input {
            name: name.to_owned(),
            reader: Box::new(reader),
        }
    }

    /// Opens the file `name` (`cannot open NAME: reason` when it cannot be).
    pub fn open(name: &str) -> Result<Input<'static>> {
        let f = std::fs::File::open(name).map_err(|source| Error::Io {
            context: format!("cannot open {}", shown(Path::new(name))),
            source,
        })?;
        Ok(Input::new(name, io::BufReader::with_capacity(1 << 16, f)))
    }

    /// Opens `name`: standard input for [`STDIN`] (`-`), else the file
    /// (for a tool that reads one input named by an option).
    pub fn named(name: &str) -> Result<Input<'static>> {
        if name == STDIN {
            return Ok(Input::new(STDIN, io::BufReader::new(io::stdin())));
        }
        Input::open(name)
    }

    /// The name as given (`-` for stdin).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name for [`Rejects`]: `None` for stdin.
    pub fn source(&self) -> Option<&str> {
        (self.name != STDIN).then_some(self.name.as_str())
    }

    /// The name as shown in a message: escaped, or `stdin`.
    pub fn shown(&self) -> String {
        match self.source() {
            Some(name) => shown(Path::new(name)),
            None => "stdin".into(),
        }
    }

    /// The reader itself, for an input that is not read a line at a time
    /// (hpc-merge's sh5util CSV).
    pub fn into_reader(self) -> Box<dyn BufRead + 'a> {
        self.reader
    }

    /// Reads the input to its end and calls `each` with every line that is
    /// not blank. Lines that are not valid UTF-8 or too long are rejected
    /// through `rejects` (with `--strict` that stops the run); an error
    /// from `each` stops the run. Returns the number of lines read, blank
    /// and rejected ones included.
    pub fn for_each_line(
        self,
        rejects: &mut Rejects,
        mut each: impl FnMut(&mut Rejects, Line<'_>) -> Result<()>,
    ) -> Result<u64> {
        self.for_each_raw_line(rejects, |rejects, raw| match raw.text(rejects)? {
            Some(line) => each(rejects, line),
            None => Ok(()),
        })
    }

    /// [`for_each_line`](Self::for_each_line) for a reader that parses
    /// bytes (hpc-merge's fast path): the lines come before their UTF-8
    /// check, which [`RawLine::text`] makes for the lines read as text.
    /// Lines of ASCII white space only are skipped, too long ones rejected.
    pub fn for_each_raw_line(
        self,
        rejects: &mut Rejects,
        mut each: impl FnMut(&mut Rejects, RawLine<'_>) -> Result<()>,
    ) -> Result<u64> {
        let Input { name, reader } = self;
        let source = (name != STDIN).then_some(name.as_str());
        let mut lines = LineReader::new(reader);
        while let Some(next) = lines.next_raw().map_err(|e| read_error(source, e))? {
            match next {
                Err((number, why)) => rejects.reject(source, number, &why)?,
                Ok(l) if l.bytes.iter().all(is_ascii_space) => {}
                Ok(l) => each(
                    rejects,
                    RawLine {
                        source,
                        number: l.number,
                        bytes: l.bytes,
                        unterminated: l.unterminated,
                    },
                )?,
            }
        }
        Ok(lines.lines_read())
    }
}

/// The ASCII characters that `str::trim` strips (White_Space).
fn is_ascii_space(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// One line of an input before its UTF-8 check: see
/// [`Input::for_each_raw_line`].
#[derive(Debug, Clone, Copy)]
pub struct RawLine<'a> {
    /// The input's name for messages (`None` for stdin).
    pub source: Option<&'a str>,
    /// 1-based line number within its input.
    pub number: u64,
    /// The bytes, without the line ending; not only ASCII white space.
    pub bytes: &'a [u8],
    /// True for a last line that had no newline.
    pub unterminated: bool,
}

impl<'a> RawLine<'a> {
    /// The line as text: `None` when it is blank, or not valid UTF-8 (then
    /// rejected as `not valid UTF-8 (byte N)`).
    pub fn text(&self, rejects: &mut Rejects) -> Result<Option<Line<'a>>> {
        let raw = crate::ndjson::RawLine {
            number: self.number,
            bytes: self.bytes,
            unterminated: self.unterminated,
        };
        match raw.text() {
            Ok(l) if l.text.trim().is_empty() => Ok(None),
            Ok(l) => Ok(Some(Line {
                source: self.source,
                number: l.number,
                text: l.text,
                unterminated: l.unterminated,
            })),
            Err((number, why)) => rejects.reject(self.source, number, &why).map(|()| None),
        }
    }
}

/// `cannot read NAME: reason`.
fn read_error(source: Option<&str>, e: io::Error) -> Error {
    Error::Io {
        context: format!(
            "cannot read {}",
            source.map_or_else(|| "stdin".into(), |s| shown(Path::new(s)))
        ),
        source: e,
    }
}

/// One line of an input, as the loop hands it over.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// The input's name for messages (`None` for stdin).
    pub source: Option<&'a str>,
    /// 1-based line number within its input.
    pub number: u64,
    /// The text, without the line ending; never blank, not trimmed.
    pub text: &'a str,
    /// True for a last line that had no newline.
    pub unterminated: bool,
}

impl Line<'_> {
    /// Rejects this line: `tool: FILE: line N: why` on stderr, counted
    /// (an error under `--strict`).
    pub fn reject(&self, rejects: &mut Rejects, why: &str) -> Result<()> {
        rejects.reject(self.source, self.number, why)
    }

    /// Warns about this line without counting it as a reject.
    pub fn warn(&self, rejects: &mut Rejects, why: &str) {
        rejects.warn(self.source, self.number, why)
    }

    /// True for the start of a JSON object that its input ended inside of,
    /// with no newline after it: what a writer killed mid-line leaves.
    /// Anything else on a last line is a bad line like any other.
    pub fn is_cut_record(&self) -> bool {
        self.unterminated
            && self.text.trim_start().starts_with('{')
            && serde_json::from_str::<IgnoredAny>(self.text).is_err_and(|e| e.is_eof())
    }

    /// Reports a line that did not parse as a record: a cut last record
    /// ([`is_cut_record`](Self::is_cut_record)) is warned about
    /// (`truncated last line ignored (why)`), anything else rejected.
    pub fn bad_record(&self, rejects: &mut Rejects, why: &str) -> Result<()> {
        if self.is_cut_record() {
            self.warn(rejects, &format!("truncated last line ignored ({why})"));
            return Ok(());
        }
        self.reject(rejects, why)
    }
}

/// Every line of every input, in order: see [`Input::for_each_line`].
/// Returns the number of lines read.
pub fn for_each_line<'s>(
    inputs: &Inputs,
    stdin: impl BufRead + 's,
    rejects: &mut Rejects,
    mut each: impl FnMut(&mut Rejects, Line<'_>) -> Result<()>,
) -> Result<u64> {
    let mut lines = 0;
    inputs.for_each(stdin, |input| {
        lines += input.for_each_line(rejects, &mut each)?;
        Ok(())
    })?;
    Ok(lines)
}

/// The kind of the record on `line`, or `None` when it was reported (not
/// a JSON object with a string `kind`).
fn kind_of<'t>(line: &Line<'t>, rejects: &mut Rejects) -> Result<Option<Cow<'t, str>>> {
    match crate::record::kind_of(line.text) {
        Ok(Some(kind)) => Ok(Some(kind)),
        Ok(None) => line.reject(rejects, "no \"kind\"").map(|()| None),
        Err(e) => line
            .bad_record(rejects, &format!("not a record: {e}"))
            .map(|()| None),
    }
}

/// Every record of every input with its `kind`, in order. A line that is
/// not a JSON object with a string `kind` is rejected (`not a record:
/// ...` or `no "kind"`), a cut last record warned about. Returns the
/// number of lines read.
pub fn for_each_record<'s>(
    inputs: &Inputs,
    stdin: impl BufRead + 's,
    rejects: &mut Rejects,
    mut each: impl FnMut(&mut Rejects, &str, Line<'_>) -> Result<()>,
) -> Result<u64> {
    for_each_line(inputs, stdin, rejects, |rejects, line| {
        match kind_of(&line, rejects)? {
            Some(kind) => each(rejects, &kind, line),
            None => Ok(()),
        }
    })
}

/// Every record of kind `kind`, deserialised into `T` (whose fields are
/// the record's without `kind`), in order; records of other kinds are
/// skipped. A record of the kind that does not fit `T` is rejected as
/// `bad KIND: reason` with its file and line; bad lines as in
/// [`for_each_record`]. Returns the number of lines read.
pub fn for_each_typed<'s, T: DeserializeOwned>(
    inputs: &Inputs,
    stdin: impl BufRead + 's,
    rejects: &mut Rejects,
    kind: &str,
    mut each: impl FnMut(&mut Rejects, T, Line<'_>) -> Result<()>,
) -> Result<u64> {
    for_each_record(inputs, stdin, rejects, |rejects, k, line| {
        if k != kind {
            return Ok(());
        }
        match crate::record::from_line::<T>(line.text) {
            Ok(record) => each(rejects, record, line),
            Err(why) => line.reject(rejects, &format!("bad {kind}: {why}")),
        }
    })
}
