//! Reading node files: one pass per file, samples binned per host as they
//! come, metas kept, other kinds passed through.

use std::borrow::Cow;
use std::io::{BufRead, Read};

use hpc_core::ndjson::Rejects;
use hpc_core::record::{from_line, Meta};
use hpc_core::Result;
use serde::Deserialize;

use crate::bins::{values_of, NodeBins};

/// The fields of a line that hpc-merge reads: the kind, and for samples
/// the time, host, job and the combined values. Strings are borrowed from
/// the line when they hold no escapes; unknown keys are skipped.
#[derive(Deserialize)]
pub(crate) struct RawSample<'a> {
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default)]
    pub t: Option<f64>,
    #[serde(borrow, default)]
    pub host: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub job_id: Option<Cow<'a, str>>,
    #[serde(default)]
    pub rss_mb: Option<f64>,
    #[serde(default)]
    pub hwm_mb: Option<f64>,
    #[serde(default)]
    pub swap_mb: Option<f64>,
    #[serde(default)]
    pub pss_mb: Option<f64>,
    #[serde(default)]
    pub gpu_mem_mb: Option<f64>,
    #[serde(default)]
    pub cpu_cores: Option<f64>,
    #[serde(default)]
    pub read_mbps: Option<f64>,
    #[serde(default)]
    pub write_mbps: Option<f64>,
    #[serde(default)]
    pub lustre_read_mbps: Option<f64>,
    #[serde(default)]
    pub lustre_write_mbps: Option<f64>,
    #[serde(default)]
    pub lustre_meta_ops: Option<f64>,
    #[serde(default)]
    pub power_w: Option<f64>,
    #[serde(default)]
    pub ib_rx_mbps: Option<f64>,
    #[serde(default)]
    pub ib_tx_mbps: Option<f64>,
    #[serde(default)]
    pub read_mb: Option<f64>,
    #[serde(default)]
    pub write_mb: Option<f64>,
    #[serde(default)]
    pub cpu_user_s: Option<f64>,
    #[serde(default)]
    pub cpu_sys_s: Option<f64>,
    #[serde(default)]
    pub energy_j: Option<f64>,
    #[serde(default)]
    pub numa_miss_rate: Option<f64>,
    #[serde(default)]
    pub cpi: Option<f64>,
    #[serde(default)]
    pub cache_miss_rate: Option<f64>,
    #[serde(default)]
    pub gpu_util: Option<f64>,
}

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

/// Splits a stream into lines, reading large blocks into one buffer and
/// finding the line ends with `memchr`; a line longer than the buffer grows
/// it. Lines are numbered and returned without their `\n` (and, when
/// terminated, one `\r` before it), as `hpc_core::ndjson::LineReader` does,
/// but as bytes: they are checked for UTF-8 only when the fast path cannot
/// read them.
struct Lines<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    number: u64,
}

/// The block read at once: large enough to make reads cheap, small enough
/// to stay in the CPU's cache while its lines are parsed.
const BLOCK: usize = 256 << 10;

impl<R: Read> Lines<R> {
    fn new(inner: R) -> Self {
        Lines {
            inner,
            buf: vec![0; BLOCK],
            start: 0,
            end: 0,
            eof: false,
            number: 0,
        }
    }

    /// The next line, its number and whether it lacked its `\n`, or `None`
    /// at the end.
    fn next_line(&mut self) -> std::io::Result<Option<(&[u8], u64, bool)>> {
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let (s, mut e) = (self.start, self.start + p);
                self.start = e + 1;
                self.number += 1;
                if e > s && self.buf[e - 1] == b'\r' {
                    e -= 1;
                }
                return Ok(Some((&self.buf[s..e], self.number, false)));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let s = self.start;
                self.start = self.end;
                self.number += 1;
                return Ok(Some((&self.buf[s..self.end], self.number, true)));
            }
            // Keep the partial line, then read more behind it.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
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

/// Reads one NDJSON stream. `name` is the file name used in messages and,
/// without a meta or `host`, as the node name.
pub(crate) fn read_stream(
    index: usize,
    name: &str,
    input: impl BufRead,
    step: f64,
) -> Result<StreamResult> {
    let source = if name == "-" { None } else { Some(name) };
    let mut rejects = Rejects::new("hpc-merge");
    let mut reader = Lines::new(input);
    let mut nodes: Vec<NodeData> = Vec::new();
    let mut passthrough = Vec::new();
    let mut last = 0usize;
    let mut keys = crate::fast::KeyCache::default();
    // The host of this stream's meta, for samples without one.
    let mut default_host: Option<String> = None;
    let fallback_host = match std::path::Path::new(name).file_name() {
        Some(f) if name != "-" => {
            let f = f.to_string_lossy();
            f.strip_suffix(".ndjson").unwrap_or(&f).to_string()
        }
        _ => "stdin".into(),
    };
    while let Some((bytes, number, unterminated)) =
        reader.next_line().map_err(|source| hpc_core::Error::Io {
            context: format!("cannot read {name}"),
            source,
        })?
    {
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
            let Some(t) = fl.t else {
                rejects.reject(source, number, "sample without t")?;
                continue;
            };
            let i = match fl.host {
                Some(h) if last < nodes.len() && nodes[last].host.as_bytes() == h => last,
                Some(h) => {
                    let h = std::str::from_utf8(h).unwrap_or_default();
                    node_index(&mut nodes, &mut last, h, step)
                }
                None => {
                    let h = default_host.as_deref().unwrap_or(&fallback_host);
                    node_index(&mut nodes, &mut last, h, step)
                }
            };
            let node = &mut nodes[i];
            if let Err(reason) = node.bins.add(t, &fl.values) {
                rejects.reject(source, number, &reason)?;
                continue;
            }
            if node.sample_job_id.is_none() {
                node.sample_job_id = fl.job_id.map(|j| String::from_utf8_lossy(j).into_owned());
            }
            continue;
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text.trim(),
            Err(e) => {
                let reason = format!("not valid UTF-8 (byte {})", e.valid_up_to());
                rejects.reject(source, number, &reason)?;
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
        slow_line(
            &line,
            source,
            &mut rejects,
            &mut nodes,
            &mut last,
            &mut keys,
            &mut default_host,
            &fallback_host,
            &mut passthrough,
            step,
        )?;
    }
    Ok(StreamResult {
        index,
        nodes,
        passthrough,
        rejected: rejects.rejected,
        lines: reader.number,
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
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
fn slow_line(
    line: &Line,
    source: Option<&str>,
    rejects: &mut Rejects,
    nodes: &mut Vec<NodeData>,
    last: &mut usize,
    keys: &mut crate::fast::KeyCache,
    default_host: &mut Option<String>,
    fallback_host: &str,
    passthrough: &mut Vec<String>,
    step: f64,
) -> Result<()> {
    let text = line.text;
    let fast = crate::fast::parse(text, keys);
    if let Some(fl) = fast.as_ref().filter(|f| f.kind == Some("sample")) {
        let Some(t) = fl.t else {
            return rejects.reject(source, line.number, "sample without t");
        };
        let host: &str = match (fl.host, &*default_host) {
            (Some(h), _) => h,
            (None, Some(h)) => h,
            (None, None) => fallback_host,
        };
        let i = node_index(nodes, last, host, step);
        let node = &mut nodes[i];
        if let Err(reason) = node.bins.add(t, &fl.values) {
            return rejects.reject(source, line.number, &reason);
        }
        if node.sample_job_id.is_none() {
            node.sample_job_id = fl.job_id.map(str::to_owned);
        }
        return Ok(());
    }
    let raw: RawSample = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            if line.unterminated {
                rejects.warn(
                    source,
                    line.number,
                    &format!("truncated last line ignored ({e})"),
                );
                return Ok(());
            }
            return rejects.reject(source, line.number, &format!("not a record: {e}"));
        }
    };
    match raw.kind.as_deref() {
        Some("sample") => {
            let Some(t) = raw.t else {
                return rejects.reject(source, line.number, "sample without t");
            };
            let host: &str = match (&raw.host, &*default_host) {
                (Some(h), _) => h,
                (None, Some(h)) => h,
                (None, None) => fallback_host,
            };
            let i = node_index(nodes, last, host, step);
            let node = &mut nodes[i];
            if let Err(reason) = node.bins.add(t, &values_of(&raw)) {
                return rejects.reject(source, line.number, &reason);
            }
            if node.sample_job_id.is_none() {
                node.sample_job_id = raw.job_id.as_deref().map(str::to_owned);
            }
        }
        Some("meta") => match from_line::<Meta>(text) {
            Ok(meta) => {
                if default_host.is_none() {
                    *default_host = Some(meta.host.clone());
                }
                let i = node_index(nodes, last, &meta.host, step);
                if nodes[i].meta.is_none() {
                    nodes[i].meta = Some(meta);
                }
            }
            Err(e) => rejects.reject(source, line.number, &format!("bad meta: {e}"))?,
        },
        Some(_) => passthrough.push(text.to_owned()),
        None => rejects.reject(source, line.number, "no \"kind\"")?,
    }
    Ok(())
}

/// The `start` of a meta on the first line of `path`, if it has one.
pub(crate) fn peek_meta_start(path: &str) -> Option<f64> {
    let f = std::fs::File::open(path).ok()?;
    let mut r = std::io::BufReader::new(f);
    let mut first = String::new();
    r.read_line(&mut first).ok()?;
    let meta: Meta = match hpc_core::record::peek_kind(first.trim()).as_deref() {
        Some("meta") => from_line(first.trim()).ok()?,
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
        let r = read_stream(0, "f.ndjson", data.as_bytes(), 1.0).unwrap();
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
        while let Some((l, n, u)) = r.next_line().unwrap() {
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
        let r = read_stream(0, "-", &bytes[..], 1.0).unwrap();
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
        let r = read_stream(0, "-", &data[..], 1.0).unwrap();
        assert_eq!(r.rejected, 3);
        assert_eq!(r.lines, 4);
        assert_eq!(r.nodes[0].host, "stdin");
    }
}
