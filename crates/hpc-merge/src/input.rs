//! Reading node files: one pass per file, samples binned per host as they
//! come, metas kept, other kinds passed through.

use std::io::{BufRead, Read};

use hpc_core::ndjson::Rejects;
use hpc_core::paths::{escaped, shown};
use hpc_core::record::{from_line, Meta};
use hpc_core::{Error, Result};

use crate::bins::NodeBins;
use crate::fields::{values_of, RawSample, NF};

/// One node's data after its input was read.
pub(crate) struct NodeData {
    pub host: String,
    pub bins: NodeBins,
    pub meta: Option<Meta>,
    /// The first job id seen on the node's samples.
    pub sample_job_id: Option<String>,
}

impl NodeData {
    pub fn new(host: String, step: f64) -> Self {
        NodeData {
            host,
            bins: NodeBins::new(step),
            meta: None,
            sample_job_id: None,
        }
    }
}

/// What one input stream gave.
pub(crate) struct StreamResult {
    /// Position of the input on the command line (output order).
    pub index: usize,
    pub nodes: Vec<NodeData>,
    /// Lines of kinds hpc-merge does not consume, unchanged.
    pub passthrough: Vec<String>,
    pub rejected: u64,
    pub lines: u64,
    /// The job this stream's records name, and the line that first did.
    pub job: Option<(String, u64)>,
}

/// Finds (or adds) the node called `host`, remembering the last one used.
fn node_index(nodes: &mut Vec<NodeData>, last: &mut usize, host: &str, step: f64) -> usize {
    if *last < nodes.len() && nodes[*last].host == host {
        return *last;
    }
    let i = match nodes.iter().position(|n| n.host == host) {
        Some(i) => i,
        None => {
            nodes.push(NodeData::new(host.to_owned(), step));
            nodes.len() - 1
        }
    };
    *last = i;
    i
}

/// The longest line read, in bytes (16 MiB): a longer one is refused with
/// its number and skipped, so an endless line cannot exhaust memory.
pub(crate) const MAX_LINE: usize = 16 << 20;

/// What [`Lines::next_line`] gives: a line, its number and whether it
/// lacked its `\n`; or the number of a line longer than the limit.
enum Piece<'a> {
    Line(&'a [u8], u64, bool),
    TooLong(u64),
}

/// Splits a stream into lines, reading large blocks into one buffer and
/// finding the line ends with `memchr`; a line longer than the buffer grows
/// it, up to the limit. Lines are numbered and returned without their `\n`
/// (and, when terminated, one `\r` before it), as
/// `hpc_core::ndjson::LineReader` does, but as bytes: they are checked for
/// UTF-8 only when the fast path cannot read them.
struct Lines<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    number: u64,
    /// The longest line given out.
    max: usize,
    /// Inside a line longer than `max`, whose bytes are dropped as read.
    skipping: bool,
}

/// The block read at once: large enough to make reads cheap, small enough
/// to stay in the CPU's cache while its lines are parsed.
const BLOCK: usize = 256 << 10;

impl<R: Read> Lines<R> {
    fn new(inner: R) -> Self {
        Self::with_max(inner, MAX_LINE)
    }

    fn with_max(inner: R, max: usize) -> Self {
        Lines {
            inner,
            buf: vec![0; BLOCK],
            start: 0,
            end: 0,
            eof: false,
            number: 0,
            max,
            skipping: false,
        }
    }

    /// The next line, or `None` at the end.
    fn next_line(&mut self) -> std::io::Result<Option<Piece<'_>>> {
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let (s, mut e) = (self.start, self.start + p);
                self.start = e + 1;
                self.number += 1;
                if self.skipping || e - s > self.max {
                    self.skipping = false;
                    return Ok(Some(Piece::TooLong(self.number)));
                }
                if e > s && self.buf[e - 1] == b'\r' {
                    e -= 1;
                }
                return Ok(Some(Piece::Line(&self.buf[s..e], self.number, false)));
            }
            if self.eof {
                if self.start == self.end && !self.skipping {
                    return Ok(None);
                }
                let s = self.start;
                self.start = self.end;
                self.number += 1;
                if std::mem::take(&mut self.skipping) || self.end - s > self.max {
                    return Ok(Some(Piece::TooLong(self.number)));
                }
                return Ok(Some(Piece::Line(&self.buf[s..self.end], self.number, true)));
            }
            if self.skipping || self.end - self.start > self.max {
                // Too long: drop what is held of it and look for its end.
                self.skipping = true;
                (self.start, self.end) = (0, 0);
            } else {
                // Keep the partial line, then read more behind it.
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.end == self.buf.len() {
                    // Here end <= max, so the buffer still grows.
                    let n = (self.buf.len() * 2).min(self.max + BLOCK);
                    self.buf.resize(n, 0);
                }
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Strips what `str::trim` strips from an ASCII line: the ASCII characters
/// with the White_Space property.
fn trim_ascii_ws(mut b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
    while let [first, rest @ ..] = b {
        if !ws(first) {
            break;
        }
        b = rest;
    }
    while let [rest @ .., last] = b {
        if !ws(last) {
            break;
        }
        b = rest;
    }
    b
}

/// The job a stream's records belong to, checked record by record.
struct JobCheck<'a> {
    /// `--job`: records of other jobs are skipped.
    want: Option<&'a str>,
    /// The first job id seen, and its line.
    seen: Option<(String, u64)>,
    /// Records of other jobs skipped, and the first of them (line, job).
    skipped: u64,
    first_skipped: Option<(u64, String)>,
}

impl JobCheck<'_> {
    /// Whether a record of line `line` that names job `job` is merged:
    /// `Ok(false)` skips a record of another job than `--job`; a second job
    /// without `--job` is an error.
    #[inline(always)]
    fn admit(&mut self, job: Option<&[u8]>, line: u64, source: &str) -> Result<bool> {
        let job = match job {
            Some(j) if !j.is_empty() => j,
            _ => return Ok(true),
        };
        if let Some(want) = self.want {
            if want.as_bytes() == job {
                return Ok(true);
            }
            self.skipped += 1;
            if self.first_skipped.is_none() {
                self.first_skipped = Some((line, shown_job(job)));
            }
            return Ok(false);
        }
        match &self.seen {
            Some((j, _)) if j.as_bytes() == job => Ok(true),
            None => {
                self.seen = Some((String::from_utf8_lossy(job).into_owned(), line));
                Ok(true)
            }
            Some((j, at)) => Err(Error::Other(format!(
                "{source}: line {line}: job {}, but line {at} is job {}: records of two jobs \
                 are not merged (give --job ID to merge one of them)",
                shown_job(job),
                escaped(j)
            ))),
        }
    }
}

/// A job id as printed in a message.
fn shown_job(job: &[u8]) -> String {
    escaped(&String::from_utf8_lossy(job))
}

/// The state of one stream being read.
struct Stream<'a> {
    /// The name shown in messages (escaped), `None` for stdin.
    source: Option<&'a str>,
    rejects: Rejects,
    jobs: JobCheck<'a>,
    nodes: Vec<NodeData>,
    /// The node of the previous sample.
    last: usize,
    /// The host of this stream's meta, for samples without one.
    default_host: Option<String>,
    /// The host of samples without one when there is no meta either.
    fallback_host: String,
    passthrough: Vec<String>,
    step: f64,
}

impl Stream<'_> {
    /// Bins one sample of line `number`.
    #[inline(always)]
    fn sample(
        &mut self,
        host: Option<&[u8]>,
        t: Option<f64>,
        values: &[f64; NF],
        job: Option<&[u8]>,
        number: u64,
    ) -> Result<()> {
        if !self
            .jobs
            .admit(job, number, self.source.unwrap_or("stdin"))?
        {
            return Ok(());
        }
        let Some(t) = t else {
            return self.rejects.reject(self.source, number, "sample without t");
        };
        let (nodes, last) = (&mut self.nodes, &mut self.last);
        let i = match host {
            Some(h) if *last < nodes.len() && nodes[*last].host.as_bytes() == h => *last,
            Some(h) => node_index(nodes, last, &String::from_utf8_lossy(h), self.step),
            None => {
                let h = self.default_host.as_deref().unwrap_or(&self.fallback_host);
                node_index(nodes, last, h, self.step)
            }
        };
        let node = &mut nodes[i];
        node.bins.add(t, values, number);
        if node.sample_job_id.is_none() {
            node.sample_job_id = job.map(|j| String::from_utf8_lossy(j).into_owned());
        }
        self.report(i)
    }

    /// Reports the samples that node `i` refused.
    #[inline(always)]
    fn report(&mut self, i: usize) -> Result<()> {
        if self.nodes[i].bins.refused.is_empty() {
            return Ok(());
        }
        for (line, reason) in std::mem::take(&mut self.nodes[i].bins.refused) {
            self.rejects.reject(self.source, line, &reason)?;
        }
        Ok(())
    }
}

/// Reads one NDJSON stream. `name` is the file name used in messages and,
/// without a meta or `host`, as the node name; with `want_job` (`--job`),
/// records of other jobs are skipped.
pub(crate) fn read_stream(
    index: usize,
    name: &str,
    input: impl Read,
    step: f64,
    want_job: Option<&str>,
) -> Result<StreamResult> {
    let shown_name = shown(std::path::Path::new(name));
    let fallback_host = match std::path::Path::new(name).file_name() {
        Some(f) if name != "-" => {
            let f = f.to_string_lossy();
            f.strip_suffix(".ndjson").unwrap_or(&f).to_string()
        }
        _ => "stdin".into(),
    };
    let mut st = Stream {
        source: (name != "-").then_some(shown_name.as_str()),
        rejects: Rejects::new("hpc-merge"),
        jobs: JobCheck {
            want: want_job,
            seen: None,
            skipped: 0,
            first_skipped: None,
        },
        nodes: Vec::new(),
        last: 0,
        default_host: None,
        fallback_host,
        passthrough: Vec::new(),
        step,
    };
    let mut reader = Lines::new(input);
    let mut keys = crate::fast::KeyCache::default();
    while let Some(piece) = reader.next_line().map_err(|source| Error::Io {
        context: format!("cannot read {shown_name}"),
        source,
    })? {
        let (bytes, number, unterminated) = match piece {
            Piece::Line(b, n, u) => (b, n, u),
            Piece::TooLong(n) => {
                let reason = format!("longer than {} MiB: skipped", MAX_LINE >> 20);
                st.rejects.reject(st.source, n, &reason)?;
                continue;
            }
        };
        // The fast path reads plain ASCII sample lines without serde (and
        // without a separate UTF-8 check: it gives up on other bytes).
        let ascii = trim_ascii_ws(bytes);
        if ascii.is_empty() {
            continue;
        }
        let mut fl = crate::fast::FastBytes::new();
        if crate::fast::parse_into::<true>(ascii, &mut keys, &mut fl)
            && fl.kind == Some(b"sample".as_slice())
        {
            st.sample(fl.host, fl.t, &fl.values, fl.job_id, number)?;
            continue;
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text.trim(),
            Err(e) => {
                let reason = format!("not valid UTF-8 (byte {})", e.valid_up_to());
                st.rejects.reject(st.source, number, &reason)?;
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        let line = Line {
            number,
            text,
            unterminated,
        };
        slow_line(&line, &mut st, &mut keys)?;
    }
    // Place the samples still held back for each node's anchor.
    for i in 0..st.nodes.len() {
        st.nodes[i].bins.settle();
        st.report(i)?;
    }
    if let Some((line, job)) = &st.jobs.first_skipped {
        hpc_core::note!(
            "hpc-merge: {}: {} records of other jobs than {} skipped (the first: line {line}, job {job})",
            st.source.unwrap_or("stdin"),
            st.jobs.skipped,
            escaped(want_job.unwrap_or_default()),
        );
    }
    Ok(StreamResult {
        index,
        nodes: st.nodes,
        passthrough: st.passthrough,
        rejected: st.rejects.rejected,
        lines: reader.number,
        job: st.jobs.seen,
    })
}

/// One line that the fast byte path did not take.
struct Line<'a> {
    number: u64,
    text: &'a str,
    unterminated: bool,
}

/// Reads a line the fast byte path did not take, as before it: the fast
/// path on the text, else serde_json.
#[cold]
#[inline(never)]
fn slow_line(line: &Line, st: &mut Stream, keys: &mut crate::fast::KeyCache) -> Result<()> {
    let (text, number, source) = (line.text, line.number, st.source);
    if let Some(fl) = crate::fast::parse(text, keys).filter(|f| f.kind == Some("sample")) {
        return st.sample(
            fl.host.map(str::as_bytes),
            fl.t,
            &fl.values,
            fl.job_id.map(str::as_bytes),
            number,
        );
    }
    let raw: RawSample = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) if line.unterminated => {
            let reason = format!("truncated last line ignored ({e})");
            st.rejects.warn(source, number, &reason);
            return Ok(());
        }
        Err(e) => {
            return st
                .rejects
                .reject(source, number, &format!("not a record: {e}"))
        }
    };
    match raw.kind.as_deref() {
        Some("sample") => {
            let host = raw.host.as_deref().map(str::as_bytes);
            let job = raw.job_id.as_deref().map(str::as_bytes);
            st.sample(host, raw.t, &values_of(&raw), job, number)?;
        }
        Some("meta") => match from_line::<Meta>(text) {
            Ok(meta) if meta.nnodes.is_some_and(|n| n as usize > crate::MAX_NODES) => {
                let reason = format!(
                    "bad meta: nnodes {} is more than the {} nodes hpc-merge takes",
                    meta.nnodes.unwrap_or_default(),
                    crate::MAX_NODES
                );
                st.rejects.reject(source, number, &reason)?;
            }
            Ok(meta) => {
                let job = meta.job_id.as_deref().map(str::as_bytes);
                if !st.jobs.admit(job, number, source.unwrap_or("stdin"))? {
                    return Ok(());
                }
                if st.default_host.is_none() {
                    st.default_host = Some(meta.host.clone());
                }
                let i = node_index(&mut st.nodes, &mut st.last, &meta.host, st.step);
                if st.nodes[i].meta.is_none() {
                    st.nodes[i].bins.set_start_hint(meta.start);
                    st.nodes[i].meta = Some(meta);
                }
            }
            Err(e) => st
                .rejects
                .reject(source, number, &format!("bad meta: {e}"))?,
        },
        Some(_) => st.passthrough.push(text.to_owned()),
        None => st.rejects.reject(source, number, "no \"kind\"")?,
    }
    Ok(())
}

/// The `start` of a meta on the first line of `path`, if it is a regular
/// file (a pipe is not read twice) that opens with a meta.
pub(crate) fn peek_meta_start(path: &str) -> Option<f64> {
    let f = std::fs::File::open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut first = Vec::new();
    std::io::BufReader::new(f.take(MAX_LINE as u64))
        .read_until(b'\n', &mut first)
        .ok()?;
    let first = std::str::from_utf8(&first).ok()?.trim();
    let meta: Meta = match hpc_core::record::peek_kind(first).as_deref() {
        Some("meta") => from_line(first).ok()?,
        _ => return None,
    };
    Some(meta.start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bins::RSS;

    #[test]
    fn bins_samples_per_host_and_passes_other_kinds() {
        let data = concat!(
            r#"{"kind":"meta","job_id":"7","host":"n1","start":100.0,"interval_s":1,"probe_version":"x"}"#,
            "\n",
            r#"{"kind":"job","job_id":"7","state":"COMPLETED"}"#,
            "\n\n",
            r#"{"kind":"sample","t":101.0,"rss_mb":5}"#,
            "\n",
            r#"{"kind":"sample","t":101.0,"host":"n2","rss_mb":7,"unknown":[1,2]}"#,
            "\n",
            r#"{"kind":"sample","t":102.0,"rss_mb":6"#
        );
        let r = read_stream(0, "f.ndjson", data.as_bytes(), 1.0, None).unwrap();
        assert_eq!(r.rejected, 0, "a truncated last line is only a warning");
        assert_eq!(r.passthrough.len(), 1);
        assert_eq!(r.nodes.len(), 2);
        assert_eq!(r.nodes[0].host, "n1");
        assert_eq!(r.nodes[0].bins.peak_rss, 5.0);
        assert_eq!(r.nodes[1].bins.peak_rss, 7.0);
        let mut got = Vec::new();
        r.nodes[0].bins.walk(3.0, |_, v| got.push(v[RSS]));
        assert_eq!(got, vec![5.0]);
    }

    #[test]
    fn lines_split_like_the_line_reader() {
        let long = "x".repeat(3 * BLOCK + 17);
        let data = format!("a\r\nb\n\n{long}\r\n\r\nlast\r");
        let mut r = Lines::new(data.as_bytes());
        let mut got = Vec::new();
        while let Some(Piece::Line(l, n, u)) = r.next_line().unwrap() {
            got.push((String::from_utf8(l.to_vec()).unwrap(), n, u));
        }
        let want = [
            ("a", 1, false),
            ("b", 2, false),
            ("", 3, false),
            (long.as_str(), 4, false),
            ("", 5, false),
            ("last\r", 6, true),
        ];
        let want: Vec<(String, u64, bool)> = want
            .iter()
            .map(|(l, n, u)| (l.to_string(), *n, *u))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn long_odd_and_non_ascii_lines_read_as_before() {
        let note = "y".repeat(BLOCK + 5);
        let data = [
            format!(r#"{{"kind":"sample","t":1,"host":"n1","note":"{note}","rss_mb":3}}"#),
            "\u{a0}{\"kind\":\"sample\",\"t\":2,\"host\":\"n1\",\"rss_mb\":4}\u{a0}".into(),
            r#"{"kind":"sample","t":3,"host":"nœud","rss_mb":5}"#.into(),
            "\x0b {\"kind\":\"sample\",\"t\":4,\"host\":\"n1\",\"rss_mb\":6}\x0c".into(),
            r#"{"kind":"sample","t":5,"host":"n1","job_id":"j\u0031","rss_mb":7}"#.into(),
        ]
        .join("\n");
        let mut bytes = data.into_bytes();
        bytes.extend_from_slice(b"\n{\"kind\":\"sample\",\"t\":6,\"host\":\"n\xff\"}\n");
        let r = read_stream(0, "-", &bytes[..], 1.0, None).unwrap();
        assert_eq!((r.lines, r.rejected), (6, 1));
        let hosts: Vec<&str> = r.nodes.iter().map(|n| n.host.as_str()).collect();
        assert_eq!(hosts, ["n1", "nœud"]);
        assert_eq!(r.nodes[0].bins.samples, 4);
        assert_eq!(r.nodes[0].bins.peak_rss, 7.0);
        assert_eq!(r.nodes[0].sample_job_id.as_deref(), Some("j1"));
        let mut got = Vec::new();
        r.nodes[0].bins.walk(1.0, |_, v| got.push(v[RSS]));
        assert_eq!(got, [3.0, 4.0, 4.0, 6.0, 7.0]);
    }

    #[test]
    fn bad_lines_are_counted() {
        let data = b"{\"kind\":\"sample\"}\nnot json\n{\"t\":1}\n{\"kind\":\"sample\",\"t\":1}\n";
        let r = read_stream(0, "-", &data[..], 1.0, None).unwrap();
        assert_eq!(r.rejected, 3);
        assert_eq!(r.lines, 4);
        assert_eq!(r.nodes[0].host, "stdin");
    }

    /// The pieces of `data` read with a line limit of `max` bytes: lines
    /// as text, too long lines as `None`, with their numbers.
    fn pieces(data: &[u8], max: usize) -> Vec<(Option<String>, u64)> {
        let mut r = Lines::with_max(data, max);
        let mut got = Vec::new();
        while let Some(p) = r.next_line().unwrap() {
            got.push(match p {
                Piece::Line(l, n, _) => (Some(String::from_utf8(l.to_vec()).unwrap()), n),
                Piece::TooLong(n) => (None, n),
            });
        }
        got
    }

    #[test]
    fn lines_longer_than_the_limit_are_skipped_by_number() {
        let max = 10;
        let long = "y".repeat(3 * BLOCK);
        let data = format!(
            "ok\n{}\nshort\n{long}\nxxxxxxxxxx\nend\n{long}",
            "x".repeat(11)
        );
        let s = |t: &str| Some(t.to_string());
        assert_eq!(
            pieces(data.as_bytes(), max),
            [
                (s("ok"), 1),
                (None, 2),
                (s("short"), 3),
                (None, 4),
                (s("xxxxxxxxxx"), 5),
                (s("end"), 6),
                (None, 7)
            ]
        );
        // A line of exactly the limit is read; the buffer stays bounded.
        let mut r = Lines::with_max(data.as_bytes(), max);
        while r.next_line().unwrap().is_some() {}
        assert_eq!(r.buf.len(), BLOCK);
        let big = BLOCK + 100;
        let line = "z".repeat(big);
        let got = pieces(format!("{line}\n{line}x\n").as_bytes(), big);
        assert_eq!(got, [(Some(line), 1), (None, 2)]);
    }

    #[test]
    fn an_overlong_line_is_a_reject_and_the_rest_is_read() {
        let mut data = br#"{"kind":"sample","t":1,"host":"n1","rss_mb":3}"#.to_vec();
        data.push(b'\n');
        data.extend(std::iter::repeat_n(b'7', MAX_LINE + 1));
        data.extend_from_slice(b"\n{\"kind\":\"sample\",\"t\":2,\"host\":\"n1\",\"rss_mb\":4}\n");
        let r = read_stream(0, "-", &data[..], 1.0, None).unwrap();
        assert_eq!((r.lines, r.rejected), (3, 1));
        assert_eq!(r.nodes[0].bins.samples, 2);
    }
}
