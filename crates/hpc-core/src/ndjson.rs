//! Line-oriented input with line numbers and the shared reject reporting.

use std::io::{self, BufRead};

use crate::error::{Error, Result};

/// One numbered line of one stream (`input::Line` adds the input's name).
#[derive(Debug)]
pub struct NumberedLine<'a> {
    /// 1-based line number.
    pub number: u64,
    /// The text, without the line ending (`\n` or `\r\n`).
    pub text: &'a str,
    /// True for a last line that had no newline (a writer killed mid-line).
    pub unterminated: bool,
}

/// One input line before its UTF-8 check (see [`LineReader::next_raw`]).
#[derive(Debug, Clone, Copy)]
pub struct RawLine<'a> {
    /// 1-based line number.
    pub number: u64,
    /// The bytes, without the line ending (`\n` or `\r\n`).
    pub bytes: &'a [u8],
    /// True for a last line that had no newline (a writer killed mid-line).
    pub unterminated: bool,
}

impl<'a> RawLine<'a> {
    /// The line as text, or its number and why it is not valid UTF-8.
    pub fn text(&self) -> std::result::Result<NumberedLine<'a>, (u64, String)> {
        match std::str::from_utf8(self.bytes) {
            Ok(text) => Ok(NumberedLine {
                number: self.number,
                text,
                unterminated: self.unterminated,
            }),
            Err(e) => Err((
                self.number,
                format!("not valid UTF-8 (byte {})", e.valid_up_to()),
            )),
        }
    }
}

/// The longest line the readers take, in bytes (16 MiB, without its line
/// ending). A longer line is rejected with its number and skipped without
/// being held in memory; the lines after it are read as usual.
pub const MAX_LINE: usize = 16 << 20;

/// Reads lines one at a time into a reused buffer, numbering them.
/// Invalid UTF-8 and lines longer than [`MAX_LINE`] are reported as errors
/// for that line, not failures of the whole stream.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    number: u64,
    /// Bytes of the reader's buffer that the previous line still borrows;
    /// consumed at the start of the next call.
    pending: usize,
    max: usize,
    /// The rest of an overlong line, already reported, is still to be skipped.
    skipping: bool,
}

/// What [`LineReader::next_line`] gives: a line, or the number of a bad
/// line and why it is bad.
pub type NextLine<'a> = std::result::Result<NumberedLine<'a>, (u64, String)>;

/// What [`LineReader::next_raw`] gives: a line's bytes, or the number of a
/// line longer than the limit and why it is bad.
pub type NextRaw<'a> = std::result::Result<RawLine<'a>, (u64, String)>;

impl<R: BufRead> LineReader<R> {
    /// Wraps a buffered reader.
    pub fn new(inner: R) -> Self {
        Self::with_max(inner, MAX_LINE)
    }

    /// Wraps a buffered reader, taking lines up to `max` bytes.
    pub fn with_max(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            buf: Vec::with_capacity(1024),
            number: 0,
            pending: 0,
            max,
            skipping: false,
        }
    }

    /// Consumes input up to and including the next newline (or to the end);
    /// true when a newline was found.
    fn skip_line(&mut self) -> io::Result<bool> {
        loop {
            let avail = self.inner.fill_buf()?;
            if avail.is_empty() {
                return Ok(false);
            }
            match memchr::memchr(b'\n', avail) {
                Some(i) => {
                    self.inner.consume(i + 1);
                    return Ok(true);
                }
                None => {
                    let n = avail.len();
                    self.inner.consume(n);
                }
            }
        }
    }

    /// Gathers a line that runs past the reader's buffer into `buf`, up to
    /// `max` bytes; `Ok(false)` when it is longer.
    fn gather(&mut self) -> io::Result<bool> {
        self.buf.clear();
        loop {
            let avail = self.inner.fill_buf()?;
            if avail.is_empty() {
                return Ok(true);
            }
            let (take, done) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            // The newline itself does not count against the limit.
            let text = take - usize::from(done);
            if self.buf.len() + text > self.max {
                return Ok(false);
            }
            self.buf.extend_from_slice(&avail[..take]);
            self.inner.consume(take);
            if done {
                return Ok(true);
            }
        }
    }

    /// The next line: `Ok(None)` at the end, `Ok(Some(Err((number,
    /// reason))))` for a line that is not valid UTF-8 or is longer than the
    /// limit (reported as soon as the limit is passed; its rest is skipped).
    /// A line that lies whole in the reader's buffer is lent from it without
    /// a copy.
    pub fn next_line(&mut self) -> io::Result<Option<NextLine<'_>>> {
        Ok(self.next_raw()?.map(|r| r.and_then(|raw| raw.text())))
    }

    /// [`next_line`](Self::next_line) without the UTF-8 check, for a reader
    /// that parses bytes and checks only the lines it must read as text:
    /// `Ok(Some(Err(..)))` only for a line longer than the limit.
    pub fn next_raw(&mut self) -> io::Result<Option<NextRaw<'_>>> {
        if self.pending > 0 {
            self.inner.consume(self.pending);
            self.pending = 0;
        }
        if self.skipping {
            self.skipping = false;
            if !self.skip_line()? {
                return Ok(None);
            }
        }
        let found = {
            let avail = self.inner.fill_buf()?;
            if avail.is_empty() {
                return Ok(None);
            }
            memchr::memchr(b'\n', avail)
        };
        let too_long = |number: u64, max: usize| {
            Ok(Some(Err((
                number,
                format!("line longer than {max} bytes: skipped"),
            ))))
        };
        let (bytes, unterminated): (&[u8], bool) = match found {
            Some(i) if i > self.max => {
                self.number += 1;
                self.pending = i + 1;
                return too_long(self.number, self.max);
            }
            Some(i) => {
                self.pending = i + 1;
                // The same buffer again: nothing was consumed since.
                (&self.inner.fill_buf()?[..i], false)
            }
            None => {
                // The line runs past the buffer: gather it.
                if !self.gather()? {
                    self.number += 1;
                    self.skipping = true;
                    self.buf = Vec::with_capacity(1024);
                    return too_long(self.number, self.max);
                }
                match self.buf.last() {
                    Some(b'\n') => (&self.buf[..self.buf.len() - 1], false),
                    _ => (&self.buf[..], true),
                }
            }
        };
        self.number += 1;
        let bytes = match bytes {
            [rest @ .., b'\r'] if !unterminated => rest,
            b => b,
        };
        Ok(Some(Ok(RawLine {
            number: self.number,
            bytes,
            unterminated,
        })))
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.number
    }
}

/// `FILE: line N` (the name escaped, see [`crate::paths::escaped`]) or `line N`.
fn place(source: Option<&str>, line: u64) -> String {
    match source {
        Some(s) => format!("{}: line {line}", crate::paths::escaped(s)),
        None => format!("line {line}"),
    }
}

/// Counts and reports rejected input lines as `tool: [file: ]line N: reason`.
#[derive(Debug)]
pub struct Rejects {
    tool: &'static str,
    /// Lines rejected so far.
    pub rejected: u64,
    /// Stop at the first bad line.
    pub strict: bool,
    quiet_after: u64,
}

impl Rejects {
    /// A reporter for `tool`.
    pub fn new(tool: &'static str) -> Self {
        Rejects {
            tool,
            rejected: 0,
            strict: false,
            quiet_after: 1000,
        }
    }

    /// Reports one bad line on stderr. With `strict`, returns an error instead.
    pub fn reject(&mut self, source: Option<&str>, line: u64, reason: &str) -> Result<()> {
        self.rejected += 1;
        let place = place(source, line);
        if self.strict {
            return Err(Error::Other(format!("{place}: {reason}")));
        }
        if self.rejected <= self.quiet_after {
            crate::note!("{}: {place}: {reason}", self.tool);
        } else if self.rejected == self.quiet_after + 1 {
            crate::note!(
                "{}: more rejected lines follow; only the count is reported",
                self.tool
            );
        }
        Ok(())
    }

    /// Reports a tolerated problem (not counted as a reject).
    pub fn warn(&mut self, source: Option<&str>, line: u64, reason: &str) {
        let place = place(source, line);
        crate::note!("{}: {place}: {reason}", self.tool);
    }

    /// `Err(Rejected)` when anything was rejected, so the exit status says so.
    pub fn finish(&self, total: u64) -> Result<()> {
        if self.rejected > 0 {
            return Err(Error::Rejected {
                rejected: self.rejected,
                total,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lines_and_strips_endings() {
        let data = b"a\r\nb\n\nlast";
        let mut r = LineReader::new(&data[..]);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            let l = l.unwrap();
            got.push((l.number, l.text.to_string(), l.unterminated));
        }
        assert_eq!(
            got,
            vec![
                (1, "a".into(), false),
                (2, "b".into(), false),
                (3, "".into(), false),
                (4, "last".into(), true)
            ]
        );
    }

    #[test]
    fn lines_longer_than_the_buffer_and_across_its_edge() {
        let long = "x".repeat(100);
        let data = format!("ab\r\n{long}\ncd\n{long}");
        let mut r = LineReader::new(std::io::BufReader::with_capacity(16, data.as_bytes()));
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            let l = l.unwrap();
            got.push((l.text.to_string(), l.unterminated));
        }
        assert_eq!(
            got,
            vec![
                ("ab".into(), false),
                (long.clone(), false),
                ("cd".into(), false),
                (long, true)
            ]
        );
    }

    #[test]
    fn invalid_utf8_is_one_bad_line() {
        let data = b"ok\n\xff\xfe\nok2\n";
        let mut r = LineReader::new(&data[..]);
        assert!(r.next_line().unwrap().unwrap().is_ok());
        let bad = r.next_line().unwrap().unwrap().unwrap_err();
        assert_eq!(bad.0, 2);
        assert!(bad.1.contains("UTF-8"));
        assert_eq!(r.next_line().unwrap().unwrap().unwrap().text, "ok2");
        assert!(r.next_line().unwrap().is_none());
    }

    #[test]
    fn an_overlong_line_is_one_bad_line_and_the_next_lines_are_read() {
        let long = "y".repeat(100);
        let data = format!("ok\n{long}\nfits\n{long}\nlast\n{long}");
        // A buffer both smaller and larger than the limit.
        for cap in [16, 1 << 16] {
            let mut r =
                LineReader::with_max(std::io::BufReader::with_capacity(cap, data.as_bytes()), 50);
            let mut got = Vec::new();
            while let Some(l) = r.next_line().unwrap() {
                got.push(match l {
                    Ok(l) => format!("{} {}", l.number, l.text),
                    Err((n, why)) => format!("{n} {why}"),
                });
            }
            let bad = "line longer than 50 bytes: skipped";
            assert_eq!(
                got,
                vec![
                    "1 ok".to_string(),
                    format!("2 {bad}"),
                    "3 fits".into(),
                    format!("4 {bad}"),
                    "5 last".into(),
                    format!("6 {bad}")
                ],
                "buffer {cap}"
            );
        }
    }

    #[test]
    fn an_endless_line_is_reported_before_its_end() {
        // An endless reader of zeros: the first call reports line 1 at once
        // (memory stays bounded), and reading on never ends, as for /dev/zero.
        let mut r = LineReader::with_max(std::io::BufReader::new(std::io::repeat(0)), 1 << 20);
        let first = r.next_line().unwrap().unwrap().unwrap_err();
        assert_eq!(first.0, 1);
        assert!(r.buf.capacity() < 1 << 21);
    }

    #[test]
    fn rejects_make_the_run_fail() {
        let mut r = Rejects::new("t");
        assert!(r.finish(3).is_ok());
        r.reject(None, 2, "bad").unwrap();
        assert!(matches!(
            r.finish(3),
            Err(Error::Rejected {
                rejected: 1,
                total: 3
            })
        ));
        r.strict = true;
        assert!(r.reject(Some("f"), 3, "worse").is_err());
    }
}
