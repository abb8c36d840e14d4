//! Reading node files: one pass per file, samples binned per host as they
//! come, metas kept, other kinds passed through.

use std::borrow::Cow;
use std::io::BufRead;

use hpc_core::ndjson::{LineReader, Rejects};
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
    let mut reader = LineReader::new(input);
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
    while let Some(line) = reader.next_line().map_err(|source| hpc_core::Error::Io {
        context: format!("cannot read {name}"),
        source,
    })? {
        let line = match line {
            Ok(l) => l,
            Err((n, reason)) => {
                rejects.reject(source, n, &reason)?;
                continue;
            }
        };
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        // The fast path reads plain sample lines without serde.
        let fast = crate::fast::parse(text, &mut keys);
        if let Some(fl) = fast.as_ref().filter(|f| f.kind == Some("sample")) {
            let Some(t) = fl.t else {
                rejects.reject(source, line.number, "sample without t")?;
                continue;
            };
            let host: &str = match (fl.host, &default_host) {
                (Some(h), _) => h,
                (None, Some(h)) => h,
                (None, None) => &fallback_host,
            };
            let i = node_index(&mut nodes, &mut last, host, step);
            let node = &mut nodes[i];
            if let Err(reason) = node.bins.add(t, &fl.values) {
                rejects.reject(source, line.number, &reason)?;
                continue;
            }
            if node.sample_job_id.is_none() {
                node.sample_job_id = fl.job_id.map(str::to_owned);
            }
            continue;
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
                } else {
                    rejects.reject(source, line.number, &format!("not a record: {e}"))?;
                }
                continue;
            }
        };
        match raw.kind.as_deref() {
            Some("sample") => {
                let Some(t) = raw.t else {
                    rejects.reject(source, line.number, "sample without t")?;
                    continue;
                };
                let host: &str = match (&raw.host, &default_host) {
                    (Some(h), _) => h,
                    (None, Some(h)) => h,
                    (None, None) => &fallback_host,
                };
                let i = node_index(&mut nodes, &mut last, host, step);
                let node = &mut nodes[i];
                if let Err(reason) = node.bins.add(t, &values_of(&raw)) {
                    rejects.reject(source, line.number, &reason)?;
                    continue;
                }
                if node.sample_job_id.is_none() {
                    node.sample_job_id = raw.job_id.as_deref().map(str::to_owned);
                }
            }
            Some("meta") => match from_line::<Meta>(text) {
                Ok(meta) => {
                    if default_host.is_none() {
                        default_host = Some(meta.host.clone());
                    }
                    let i = node_index(&mut nodes, &mut last, &meta.host, step);
                    if nodes[i].meta.is_none() {
                        nodes[i].meta = Some(meta);
                    }
                }
                Err(e) => rejects.reject(source, line.number, &format!("bad meta: {e}"))?,
            },
            Some(_) => passthrough.push(text.to_owned()),
            None => rejects.reject(source, line.number, "no \"kind\"")?,
        }
    }
    Ok(StreamResult {
        index,
        nodes,
        passthrough,
        rejected: rejects.rejected,
        lines: reader.lines_read(),
    })
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
    fn bad_lines_are_counted() {
        let data = b"{\"kind\":\"sample\"}\nnot json\n{\"t\":1}\n{\"kind\":\"sample\",\"t\":1}\n";
        let r = read_stream(0, "-", &data[..], 1.0).unwrap();
        assert_eq!(r.rejected, 3);
        assert_eq!(r.lines, 4);
        assert_eq!(r.nodes[0].host, "stdin");
    }
}
