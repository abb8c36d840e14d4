//! Reading node files: one pass per file, samples binned per host as they
//! come, metas kept, other kinds passed through.

use std::io::{BufRead, Read};

use hpc_core::input::{Input, Line, RawLine, STDIN};
use hpc_core::ndjson::MAX_LINE;

use hpc_core::ndjson::Rejects;
use hpc_core::paths::escaped;
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
    /// The input's name for rejects, `None` for stdin.
    source: Option<&'a str>,
    /// The input's name as shown in messages (escaped, or `stdin`).
    shown: String,
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

impl<'a> Stream<'a> {
    /// A stream of the input `name` (`-` for stdin), shown as `shown`.
    fn new(name: &'a str, shown: String, step: f64, want_job: Option<&'a str>) -> Self {
        let fallback_host = match std::path::Path::new(name).file_name() {
            Some(f) if name != STDIN => {
                let f = f.to_string_lossy();
                f.strip_suffix(".ndjson").unwrap_or(&f).to_string()
            }
            _ => "stdin".into(),
        };
        Stream {
            source: (name != STDIN).then_some(name),
            shown,
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
        }
    }

    /// Reads one line: plain ASCII sample lines on the fast path, without
    /// serde and before (without) the UTF-8 check; the rest as text, as
    /// [`slow_line`] does.
    #[inline(always)]
    fn line(
        &mut self,
        rejects: &mut Rejects,
        raw: &RawLine,
        keys: &mut crate::fast::KeyCache,
    ) -> Result<()> {
        let ascii = trim_ascii_ws(raw.bytes);
        let mut fl = crate::fast::FastBytes::new();
        if crate::fast::parse_into::<true>(ascii, keys, &mut fl)
            && fl.kind == Some(b"sample".as_slice())
        {
            return self.sample(rejects, fl.host, fl.t, &fl.values, fl.job_id, raw.number);
        }
        match raw.text(rejects)? {
            Some(line) => slow_line(&line, self, rejects, keys),
            None => Ok(()),
        }
    }

    /// Bins one sample of line `number`.
    #[inline(always)]
    fn sample(
        &mut self,
        rejects: &mut Rejects,
        host: Option<&[u8]>,
        t: Option<f64>,
        values: &[f64; NF],
        job: Option<&[u8]>,
        number: u64,
    ) -> Result<()> {
        if !self.jobs.admit(job, number, &self.shown)? {
            return Ok(());
        }
        let Some(t) = t else {
            return rejects.reject(self.source, number, "sample without t");
        };
        // Every combined field is a size, a rate or a count: a negative one,
        // or one no meter gives, is no reading (rss_mb 1e308 was merged, and
        // two of them summed to null).
        if let Some((k, v)) = values
            .iter()
            .enumerate()
            .find(|(_, v)| !v.is_nan() && !(0.0..=MAX_READING).contains(*v))
        {
            let name = crate::fields::FIELDS[k].name;
            let v = if v.abs() < MAX_READING {
                v.to_string()
            } else {
                format!("{v:e}")
            };
            return rejects.reject(
                self.source,
                number,
                &format!("sample: {name} {v} is not a reading from 0 to 1e15"),
            );
        }
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
        self.report(rejects, i)
    }

    /// Reports the samples that node `i` refused.
    #[inline(always)]
    fn report(&mut self, rejects: &mut Rejects, i: usize) -> Result<()> {
        if self.nodes[i].bins.refused.is_empty() {
            return Ok(());
        }
        for (line, reason) in std::mem::take(&mut self.nodes[i].bins.refused) {
            rejects.reject(self.source, line, &reason)?;
        }
        Ok(())
    }

    /// Places the samples still held back for each node's anchor and
    /// gives what the stream read (`lines` of them).
    fn finish(mut self, index: usize, lines: u64, mut rejects: Rejects) -> Result<StreamResult> {
        for i in 0..self.nodes.len() {
            self.nodes[i].bins.settle();
            self.report(&mut rejects, i)?;
        }
        if let Some((line, job)) = &self.jobs.first_skipped {
            hpc_core::note!(
                "hpc-merge: {}: {} records of other jobs than {} skipped (the first: line {line}, job {job})",
                self.shown,
                self.jobs.skipped,
                escaped(self.jobs.want.unwrap_or_default()),
            );
        }
        Ok(StreamResult {
            index,
            nodes: self.nodes,
            passthrough: self.passthrough,
            rejected: rejects.rejected,
            lines,
            job: self.jobs.seen,
        })
    }
}

/// The largest reading a sample's field may hold, as hpc-plot reads them.
const MAX_READING: f64 = 1e15;

/// Reads one NDJSON input, the `index`th. Its name is used in messages
/// and, without a meta or `host`, as the node name; with `want_job`
/// (`--job`), records of other jobs are skipped.
pub(crate) fn read_stream(
    index: usize,
    input: Input,
    step: f64,
    want_job: Option<&str>,
) -> Result<StreamResult> {
    let name = input.name().to_owned();
    let mut st = Stream::new(&name, input.shown(), step, want_job);
    let mut rejects = Rejects::new("hpc-merge");
    let mut keys = crate::fast::KeyCache::default();
    let lines = input.for_each_raw_line(&mut rejects, |rejects, raw| {
        st.line(rejects, &raw, &mut keys)
    })?;
    st.finish(index, lines, rejects)
}

/// Reads a line the fast byte path did not take, as before it: the fast
/// path on the text, else serde_json.
#[cold]
#[inline(never)]
fn slow_line(
    line: &Line,
    st: &mut Stream,
    rejects: &mut Rejects,
    keys: &mut crate::fast::KeyCache,
) -> Result<()> {
    let (text, number) = (line.text.trim(), line.number);
    if let Some(fl) = crate::fast::parse(text, keys).filter(|f| f.kind == Some("sample")) {
        return st.sample(
            rejects,
            fl.host.map(str::as_bytes),
            fl.t,
            &fl.values,
            fl.job_id.map(str::as_bytes),
            number,
        );
    }
    let raw: RawSample = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => return line.bad_record(rejects, &format!("not a record: {e}")),
    };
    match raw.kind.as_deref() {
        Some("sample") => {
            let host = raw.host.as_deref().map(str::as_bytes);
            let job = raw.job_id.as_deref().map(str::as_bytes);
            st.sample(rejects, host, raw.t, &values_of(&raw), job, number)?;
        }
        Some("meta") => read_meta(line, st, rejects)?,
        Some(_) => st.passthrough.push(text.to_owned()),
        None => line.reject(rejects, "no \"kind\"")?,
    }
    Ok(())
}

/// Takes the meta on `line`: the node's start and requests.
fn read_meta(line: &Line, st: &mut Stream, rejects: &mut Rejects) -> Result<()> {
    let meta = match from_line::<Meta>(line.text.trim()) {
        Ok(meta) => meta,
        Err(e) => return line.reject(rejects, &format!("bad meta: {e}")),
    };
    if meta.nnodes.is_some_and(|n| n as usize > crate::MAX_NODES) {
        let reason = format!(
            "bad meta: nnodes {} is more than the {} nodes hpc-merge takes",
            meta.nnodes.unwrap_or_default(),
            crate::MAX_NODES
        );
        return line.reject(rejects, &reason);
    }
    let job = meta.job_id.as_deref().map(str::as_bytes);
    if !st.jobs.admit(job, line.number, &st.shown)? {
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
        let r = read_stream(0, Input::new("f.ndjson", data.as_bytes()), 1.0, None).unwrap();
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
    fn long_odd_and_non_ascii_lines_read_as_before() {
        let note = "y".repeat((256 << 10) + 5);
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
        let r = read_stream(0, Input::new("-", &bytes[..]), 1.0, None).unwrap();
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
        let r = read_stream(0, Input::new("-", &data[..]), 1.0, None).unwrap();
        assert_eq!(r.rejected, 3);
        assert_eq!(r.lines, 4);
        assert_eq!(r.nodes[0].host, "stdin");
    }

    #[test]
    fn an_overlong_line_is_a_reject_and_the_rest_is_read() {
        let mut data = br#"{"kind":"sample","t":1,"host":"n1","rss_mb":3}"#.to_vec();
        data.push(b'\n');
        data.extend(std::iter::repeat_n(b'7', MAX_LINE + 1));
        data.extend_from_slice(b"\n{\"kind\":\"sample\",\"t\":2,\"host\":\"n1\",\"rss_mb\":4}\n");
        let r = read_stream(0, Input::new("-", &data[..]), 1.0, None).unwrap();
        assert_eq!((r.lines, r.rejected), (3, 1));
        assert_eq!(r.nodes[0].bins.samples, 2);
    }
}
