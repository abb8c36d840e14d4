//! Reading the CSV that `sh5util -E --series=Tasks --level=Node:TimeSeries`
//! extracts from a SLURM HDF5 job profile.
//!
//! Columns used (by header name): `Step`, `Node`, `EpochTime` (Unix
//! seconds), `CPUUtilization` (percent of one core over the interval),
//! `RSS` (KiB), `ReadMB` and `WriteMB` (MB in the interval). Rows of all
//! selected steps that share a node and a time are summed, so a node's
//! series is the job's use on that node. This reader keeps the rows of a
//! file in memory: sh5util files are small (one line per second and step).

use std::collections::BTreeMap;
use std::io::Read;

use hpc_core::ndjson::Rejects;
use hpc_core::{Error, Result};

use crate::bins::{idx, NF};
use crate::input::{NodeData, StreamResult};

#[derive(Default, Clone, Copy)]
struct Row {
    rss_kb: f64,
    cores: f64,
    read_mb: f64,
    write_mb: f64,
    has_io: bool,
}

/// True when the sh5util `Step` value is the step asked for (`0`, or
/// `17.0` meaning step 0 of job 17).
fn step_matches(want: Option<&str>, step: &str) -> bool {
    match want {
        None => true,
        Some(w) => w == step || w.rsplit('.').next() == Some(step),
    }
}

/// Reads one sh5util CSV into per-node bins.
pub(crate) fn read_sh5util(
    index: usize,
    name: &str,
    input: impl Read,
    step: f64,
    want_step: Option<&str>,
) -> Result<StreamResult> {
    let shown_name = hpc_core::paths::shown(std::path::Path::new(name));
    let source = (name != "-").then_some(shown_name.as_str());
    let mut rejects = Rejects::new("hpc-merge");
    let mut rdr = csv::ReaderBuilder::new().flexible(true).from_reader(input);
    let cols = Columns::of(rdr.headers()?, &shown_name)?;
    // (node, time in ms) -> summed row.
    let mut rows: BTreeMap<(String, i64), Row> = BTreeMap::new();
    let mut lines = 1u64;
    for rec in rdr.records() {
        lines += 1;
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                rejects.reject(source, lines, &format!("bad CSV row: {e}"))?;
                continue;
            }
        };
        let line = rec.position().map(|p| p.line()).unwrap_or(lines);
        let get = |c: usize| rec.get(c).map(str::trim).unwrap_or("");
        if !step_matches(want_step, get(cols.step)) {
            continue;
        }
        let (t, rss, util, read, write) = match cols.parse(&get) {
            Ok(p) => p,
            Err(reason) => {
                rejects.reject(source, line, &reason)?;
                continue;
            }
        };
        let e = rows
            .entry((get(cols.node).to_owned(), (t * 1000.0).round() as i64))
            .or_default();
        e.rss_kb += rss.unwrap_or(0.0);
        e.cores += util.unwrap_or(0.0) / 100.0;
        if read.is_some() || write.is_some() {
            e.has_io = true;
            e.read_mb += read.unwrap_or(0.0);
            e.write_mb += write.unwrap_or(0.0);
        }
    }
    let mut nodes = bin_rows(rows, step);
    for n in &mut nodes {
        n.bins.settle();
        for (line, reason) in std::mem::take(&mut n.bins.refused) {
            rejects.reject(source, line, &reason)?;
        }
    }
    Ok(StreamResult {
        index,
        nodes,
        passthrough: Vec::new(),
        rejected: rejects.rejected,
        lines,
        job: None,
    })
}

/// A row's time, RSS, CPU use, read and written MB.
type Parsed = (f64, Option<f64>, Option<f64>, Option<f64>, Option<f64>);

/// The columns read, by position.
struct Columns {
    step: usize,
    node: usize,
    time: usize,
    rss: usize,
    util: Option<usize>,
    read: Option<usize>,
    write: Option<usize>,
}

impl Columns {
    /// Finds the columns in the header; an error names the first required
    /// one missing.
    fn of(headers: &csv::StringRecord, shown_name: &str) -> Result<Self> {
        let col = |n: &str| headers.iter().position(|h| h.trim() == n);
        let need = |n: &str| {
            col(n).ok_or_else(|| {
                Error::Other(format!(
                    "{shown_name}: not an sh5util Node:TimeSeries CSV: no {n} column"
                ))
            })
        };
        Ok(Columns {
            step: need("Step")?,
            node: need("Node")?,
            time: need("EpochTime")?,
            rss: need("RSS")?,
            util: col("CPUUtilization"),
            read: col("ReadMB"),
            write: col("WriteMB"),
        })
    }

    /// Parses a row's numbers; `get` gives a trimmed cell by column.
    fn parse<'r>(&self, get: &impl Fn(usize) -> &'r str) -> std::result::Result<Parsed, String> {
        let num = |c: Option<usize>, what: &str| -> std::result::Result<Option<f64>, String> {
            match c.map(get) {
                None | Some("") => Ok(None),
                Some(s) => s
                    .parse::<f64>()
                    .map(Some)
                    .map_err(|_| format!("{what} '{s}': not a number")),
            }
        };
        let t = num(Some(self.time), "EpochTime")?.ok_or("no EpochTime")?;
        let rss = num(Some(self.rss), "RSS")?;
        let util = num(self.util, "CPUUtilization")?;
        let read = num(self.read, "ReadMB")?;
        let write = num(self.write, "WriteMB")?;
        Ok((t, rss, util, read, write))
    }
}

/// Bins the summed rows, node by node in time order; I/O becomes
/// cumulative MB and rates over the time since the node's last row.
fn bin_rows(rows: BTreeMap<(String, i64), Row>, step: f64) -> Vec<NodeData> {
    let mut nodes: Vec<NodeData> = Vec::new();
    let (rss_i, cores_i) = (idx("rss_mb"), idx("cpu_cores"));
    let (rmb, wmb, rps, wps) = (
        idx("read_mb"),
        idx("write_mb"),
        idx("read_mbps"),
        idx("write_mbps"),
    );
    let mut cum = (0.0, 0.0);
    let mut prev_t = f64::NAN;
    for ((node, tms), row) in rows {
        if nodes.last().map(|n| n.host != node).unwrap_or(true) {
            nodes.push(NodeData::new(node, step));
            cum = (0.0, 0.0);
            prev_t = f64::NAN;
        }
        let t = tms as f64 / 1000.0;
        let mut v = [f64::NAN; NF];
        v[rss_i] = row.rss_kb / 1024.0;
        v[cores_i] = row.cores;
        if row.has_io {
            cum.0 += row.read_mb;
            cum.1 += row.write_mb;
            v[rmb] = cum.0;
            v[wmb] = cum.1;
            let dt = t - prev_t;
            if dt > 0.0 {
                v[rps] = row.read_mb / dt;
                v[wps] = row.write_mb / dt;
            }
        }
        prev_t = t;
        let n = nodes.last_mut().expect("pushed above");
        n.bins.add(t, &v, 0);
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "Step,Node,Series,ElapsedTime,EpochTime,CPUFrequency,CPUTime,CPUUtilization,RSS,VMSize,Pages,ReadMB,WriteMB\n\
0,vm,0,0,100,2700,0,0,1024,1,0,0,0\n\
0,vm,0,1,101,2700,0.5,50,2048,1,0,2,0\n\
batch,vm,0,0,100,2700,0,0,512,1,0,0,0\n\
batch,vm,0,1,101,2700,0,0,512,1,0,0,0\n";

    #[test]
    fn steps_on_a_node_are_summed() {
        let r = read_sh5util(0, "x.csv", CSV.as_bytes(), 1.0, None).unwrap();
        assert_eq!(r.nodes.len(), 1);
        assert_eq!(r.nodes[0].bins.peak_rss, 2.5);
    }

    #[test]
    fn one_step_can_be_chosen() {
        let r = read_sh5util(0, "x.csv", CSV.as_bytes(), 1.0, Some("17.0")).unwrap();
        assert_eq!(r.nodes[0].bins.peak_rss, 2.0);
        assert!(step_matches(Some("batch"), "batch"));
        assert!(!step_matches(Some("0"), "batch"));
    }

    #[test]
    fn a_csv_without_the_columns_is_an_error() {
        assert!(read_sh5util(0, "x.csv", &b"a,b\n1,2\n"[..], 1.0, None).is_err());
    }
}
