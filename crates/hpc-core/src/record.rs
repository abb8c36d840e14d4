//! The record types that travel between the tools, one JSON object a line.
//!
//! Every record has a `kind`. Field names carry their units (`rss_mb`,
//! `elapsed_s`); absent data is absent, never 0.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

crate::record_table! {
/// One SLURM job as the accounting database knows it, with its steps merged
/// and the derived efficiencies and waste.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Job {
    cluster: String [Text, "", "The cluster name (sacct `Cluster`, or the ingest's `--cluster`)."],
    job_id: String [Text, "", "The job id as sacct shows it (`123`, `123_4`, `123+1`)."],
    job_id_raw: String [Text, "", "The raw numeric id (unique per cluster; array tasks have their own)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<String> [Text, "", "The submitting user."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account: Option<String> [Text, "", "The account charged."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<String> [Text, "", "The user's group (sacct `Group`, or a mapping file)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partition: Option<String> [Text, "", "The partition."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job_name: Option<String> [Text, "", "The job name."],
    state: String [Text, "", "The normalised state (`CANCELLED by 42` becomes `CANCELLED`)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cancelled_by: Option<u32> [Int, "", "The uid that cancelled the job, from `CANCELLED by <uid>`."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_code: Option<String> [Text, "", "The exit code as `code:signal`."],
    #[serde(default)]
    submit: Option<String> [Time, "", "Submit time, RFC 3339."],
    #[serde(default)]
    start: Option<String> [Time, "", "Start time, RFC 3339, or null when the job never started."],
    #[serde(default)]
    end: Option<String> [Time, "", "End time, RFC 3339, or null while it runs."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    elapsed_s: Option<f64> [Real, "s", "Wall time in seconds."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timelimit_s: Option<f64> [Real, "s", "The time limit in seconds (absent when unlimited or unknown)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alloc_cpus: Option<u32> [Int, "", "Allocated CPUs."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alloc_gpus: Option<u32> [Int, "", "Allocated GPUs (from AllocTRES)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nnodes: Option<u32> [Int, "", "Allocated nodes."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ntasks: Option<u32> [Int, "", "Tasks (the largest NTasks of the job or its steps)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node_list: Option<String> [Text, "", "The node list in SLURM's compressed form."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    req_mem_mb: Option<f64> [Real, "MiB", "The memory the job may use in total (after `n`/`c` scaling), MiB."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_rss_mb: Option<f64> [Real, "MiB", "The largest MaxRSS of any step, MiB."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    total_cpu_s: Option<f64> [Real, "s", "Total CPU (user + system) seconds of all steps."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_eff: Option<f64> [Real, "%", "CPU efficiency in percent."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mem_eff: Option<f64> [Real, "%", "Memory efficiency in percent."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_hours_reserved: Option<f64> [Real, "h", "CPU-hours reserved (allocated CPUs x elapsed)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_hours_wasted: Option<f64> [Real, "h", "CPU-hours reserved but not used."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mem_gb_hours_reserved: Option<f64> [Real, "GiB h", "Memory GiB-hours reserved."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mem_gb_hours_wasted: Option<f64> [Real, "GiB h", "Memory GiB-hours reserved above the peak."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_hours_reserved: Option<f64> [Real, "h", "GPU-hours reserved."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_mem_max_mb: Option<f64> [Real, "MiB", "Peak GPU memory of any task (sacct TRESUsageInMax `gres/gpumem`), MiB; absent without GPU accounting."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_util: Option<f64> [Real, "%", "Mean utilisation of the allocated GPUs (sacct TRESUsageInAve `gres/gpuutil`), percent; absent without GPU accounting."],
    is_final: bool [Bool, "", "True once the state is final (not RUNNING, PENDING, ...)."],
}
}

impl Job {
    /// Computes the efficiencies and the reserved and wasted hours from
    /// the elapsed time, CPUs, requested memory and GPUs (see man
    /// hpc-ingest), `used_mem_mb` the memory used: what hpc-ingest writes,
    /// and what hpc-store put fills in for a job record that has none of
    /// them (its reports summed such jobs as 0 hours).
    pub fn derive(&mut self, used_mem_mb: Option<f64>) {
        let round = |v: f64, places: i32| {
            let m = 10f64.powi(places);
            (v * m).round() / m
        };
        let elapsed = self.elapsed_s.unwrap_or(0.0);
        let hours = elapsed / 3600.0;
        // Without an elapsed time the hours are unknown, not zero.
        let known = self.elapsed_s.is_some();
        if let Some(cpus) = self.alloc_cpus.filter(|_| known) {
            let reserved = f64::from(cpus) * hours;
            self.cpu_hours_reserved = Some(round(reserved, 6));
            if let Some(cpu) = self.total_cpu_s {
                self.cpu_hours_wasted = Some(round((reserved - cpu / 3600.0).max(0.0), 6));
                if elapsed > 0.0 && cpus > 0 {
                    self.cpu_eff = Some(round(100.0 * cpu / (elapsed * f64::from(cpus)), 4));
                }
            }
        }
        if let Some(req) = self.req_mem_mb {
            if known {
                self.mem_gb_hours_reserved = Some(round(req / 1024.0 * hours, 6));
            }
            // A peak of 0 is no reading (a process holds some memory): for
            // hpc-ingest's records and hpc-store put's alike.
            if let Some(used) = used_mem_mb.filter(|u| *u > 0.0) {
                if known {
                    self.mem_gb_hours_wasted =
                        Some(round(((req - used) / 1024.0).max(0.0) * hours, 6));
                }
                if req > 0.0 {
                    self.mem_eff = Some(round(100.0 * used / req, 4));
                }
            }
        }
        if let Some(g) = self.alloc_gpus.filter(|_| known) {
            self.gpu_hours_reserved = Some(round(f64::from(g) * hours, 6));
        }
        if let Some(m) = self.max_rss_mb.as_mut() {
            *m = round(*m, 4);
        }
        if let Some(m) = self.req_mem_mb.as_mut() {
            *m = round(*m, 4);
        }
    }
}

/// The first record a probe writes: what it watches and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The SLURM job id, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The SLURM step, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The host name.
    pub host: String,
    /// Start time, Unix seconds.
    pub start: f64,
    /// The first sampling interval, seconds.
    pub interval_s: f64,
    /// The longest interval, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval_s: Option<f64>,
    /// Requested CPUs on this node, from the SLURM environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req_cpus: Option<u32>,
    /// Requested memory, MiB, from the SLURM environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req_mem_mb: Option<f64>,
    /// Requested GPUs, from the SLURM environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req_gpus: Option<u32>,
    /// Number of nodes of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nnodes: Option<u32>,
    /// What is watched: `job`, `pid` or `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The probe's version.
    pub probe_version: String,
    /// Anything else the probe wants to say (sources found, cgroup path).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

crate::record_table! {
/// One sample of one node (or, after hpc-merge, of the whole job).
/// Every field but `t` is optional: a source that is absent leaves it out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    t: f64 [Real, "s", "Unix seconds."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<String> [Text, "", "The node."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job_id: Option<String> [Text, "", "The SLURM job id."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rss_mb: Option<f64> [Real, "MiB", "Resident set size of the watched processes."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hwm_mb: Option<f64> [Real, "MiB", "Peak memory (never goes down)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    swap_mb: Option<f64> [Real, "MiB", "Swap used."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pss_mb: Option<f64> [Real, "MiB", "Proportional set size."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_user_s: Option<f64> [Real, "s", "User CPU seconds, cumulative."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_sys_s: Option<f64> [Real, "s", "System CPU seconds, cumulative."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_cores: Option<f64> [Real, "cores", "Busy cores over the interval."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_frac: Option<f64> [Real, "", "Busy cores over the allocated CPUs."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threads: Option<u32> [Int, "", "Threads of the watched processes."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    procs: Option<u32> [Int, "", "Watched processes."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    read_mb: Option<f64> [Real, "MiB", "Read from storage, cumulative."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_mb: Option<f64> [Real, "MiB", "Written to storage, cumulative."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    read_mbps: Option<f64> [Real, "MiB/s", "Storage read rate."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_mbps: Option<f64> [Real, "MiB/s", "Storage write rate."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    numa_miss_rate: Option<f64> [Real, "", "NUMA misses over NUMA accesses (node-wide)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lustre_read_mbps: Option<f64> [Real, "MiB/s", "Lustre read rate (node-wide)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lustre_write_mbps: Option<f64> [Real, "MiB/s", "Lustre write rate (node-wide)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lustre_meta_ops: Option<f64> [Real, "1/s", "Lustre metadata operations per second (node-wide)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpi: Option<f64> [Real, "", "Cycles per instruction."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_miss_rate: Option<f64> [Real, "", "Cache misses over cache references."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    energy_j: Option<f64> [Real, "J", "Energy of the CPU packages since the probe started, cumulative."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    power_w: Option<f64> [Real, "W", "Mean package power over the interval."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ib_rx_mbps: Option<f64> [Real, "MiB/s", "InfiniBand receive rate."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ib_tx_mbps: Option<f64> [Real, "MiB/s", "InfiniBand send rate."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_util: Option<f64> [Real, "%", "GPU use, mean over the job's GPUs."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_mem_mb: Option<f64> [Real, "MiB", "GPU memory used, summed over the job's GPUs."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_mem_total_mb: Option<f64> [Real, "MiB", "GPU memory of the job's GPUs, summed."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_power_w: Option<f64> [Real, "W", "GPU power draw, summed over the job's GPUs."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    page_cache_mb: Option<f64> [Real, "MiB", "Page cache charged to the job's cgroup (file pages; shared memory is in rss_mb); absent without a cgroup."],
}
}

crate::record_table! {
/// One GPU of the job in one sample (kind `gpu`): the probe writes one per
/// GPU after each `sample`, a GPU with no process of the job on it
/// included. Absent readings are absent, never 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    t: f64 [Real, "s", "Unix seconds (the sample's)."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<String> [Text, "", "The node."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job_id: Option<String> [Text, "", "The SLURM job id."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_index: Option<u32> [Int, "", "The GPU's NVML index on the node."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_uuid: Option<String> [Text, "", "The GPU's UUID."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_util: Option<f64> [Real, "%", "Utilisation over the driver's last sample period."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_mem_mb: Option<f64> [Real, "MiB", "Memory used on the GPU."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_mem_total_mb: Option<f64> [Real, "MiB", "The GPU's memory."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_power_w: Option<f64> [Real, "W", "Power draw."],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu_procs: Option<u32> [Int, "", "Processes of the job on the GPU (absent when the driver does not list them)."],
}
}

/// A job-wide (no `host`) or per-node summary, written by hpc-merge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The job id.
    pub job_id: String,
    /// The node; absent on the job-wide summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Sampled duration, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Peak RSS, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mb: Option<f64>,
    /// Mean RSS, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_rss_mb: Option<f64>,
    /// CPU seconds (integral of busy cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// Mean busy cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_cpu_cores: Option<f64>,
    /// Coefficient of variation of per-node mean CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cpu_cv: Option<f64>,
    /// The nodes that contributed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Nodes expected but without a file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_nodes: Vec<String>,
    /// Where the merged series is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// Flags whose inputs were absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_evaluated: Vec<String>,
    /// Totals and means named like the sample fields (`read_mb`, `energy_j`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One raised anomaly flag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Flag {
    /// The job id.
    pub job_id: String,
    /// The flag name (`oom_killed`, `mem_overrequest`, ...).
    pub flag: String,
    /// The category (`misuse`, `I/O`, `hardware`, `multi-node`).
    pub category: String,
    /// The measured value.
    #[serde(default)]
    pub value: Option<f64>,
    /// The threshold it was compared with.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// One line on why.
    pub reason: String,
}

/// The `kind` field of a record, read without building the rest.
#[derive(Deserialize)]
struct KindField<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
}

/// The `kind` of an NDJSON line, read without building the rest of the
/// record (borrowed unless it has escapes): `Ok(None)` for a JSON object
/// without a `kind`, an error for a line that is not a JSON object or
/// whose `kind` is not a string.
pub fn kind_of(line: &str) -> Result<Option<Cow<'_, str>>, serde_json::Error> {
    if !line.trim_start().starts_with('{') {
        // Not an object (a struct would also take an array): say why.
        return serde_json::from_str::<Map<String, Value>>(line).map(|_| None);
    }
    serde_json::from_str::<KindField>(line).map(|k| k.kind)
}

/// The `kind` of an NDJSON line when it is a record with a string `kind`
/// (see [`kind_of`]).
pub fn peek_kind(line: &str) -> Option<String> {
    kind_of(line).ok().flatten().map(Cow::into_owned)
}

/// Writes `record` as one NDJSON line with its `kind` first. The line is
/// built whole in memory and written with one call, so a reader never sees
/// half a record from a killed writer that flushes per line.
pub fn write_tagged<W: std::io::Write, T: Serialize>(
    out: &mut W,
    kind: &'static str,
    record: &T,
) -> crate::Result<()> {
    let mut buf = Vec::with_capacity(512);
    tag_into(&mut buf, kind, record)?;
    out.write_all(&buf)?;
    Ok(())
}

/// Appends `record` as one NDJSON line (with `kind` first and a newline) to `buf`.
pub fn tag_into<T: Serialize>(buf: &mut Vec<u8>, kind: &str, record: &T) -> crate::Result<()> {
    let start = buf.len();
    serde_json::to_writer(&mut *buf, record)?;
    if buf.get(start) != Some(&b'{') {
        return Err(crate::Error::Other(format!(
            "a {kind} record must be a JSON object"
        )));
    }
    let head = if buf.len() - start == 2 {
        format!("{{\"kind\":\"{kind}\"")
    } else {
        format!("{{\"kind\":\"{kind}\",")
    };
    buf.splice(start..start + 1, head.into_bytes());
    buf.push(b'\n');
    Ok(())
}

/// Parses one NDJSON line into a typed record, dropping its `kind` tag
/// (so records with a flattened `extra` map do not keep it twice).
pub fn from_line<T: serde::de::DeserializeOwned>(line: &str) -> Result<T, String> {
    let mut map: Map<String, Value> = serde_json::from_str(line).map_err(|e| e.to_string())?;
    map.remove("kind");
    serde_json::from_value(Value::Object(map)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_peak_of_zero_is_no_reading() {
        // hpc-store put derives a hand-written record's figures: MaxRSS 0
        // gave mem_eff 0 there, while hpc-ingest left it out.
        let mut j = Job {
            elapsed_s: Some(3600.0),
            req_mem_mb: Some(4096.0),
            max_rss_mb: Some(0.0),
            ..Job::default()
        };
        j.derive(j.max_rss_mb);
        assert_eq!(j.mem_eff, None);
        assert_eq!(j.mem_gb_hours_wasted, None);
        assert_eq!(j.mem_gb_hours_reserved, Some(4.0));
        j.derive(Some(1024.0));
        assert_eq!(j.mem_eff, Some(25.0));
    }

    use super::*;

    #[test]
    fn the_kind_is_read_from_objects_only() {
        assert_eq!(
            peek_kind(r#"{"kind":"job","x":[1,2]}"#).as_deref(),
            Some("job")
        );
        assert_eq!(kind_of(r#"{"x":1}"#).unwrap(), None);
        assert_eq!(peek_kind(r#"["job"]"#), None, "an array is not a record");
        assert!(kind_of(r#"["job"]"#).is_err());
        assert!(kind_of(r#"{"kind":3}"#).is_err());
        assert_eq!(peek_kind("not json"), None);
    }

    #[test]
    fn job_round_trips_with_kind_first() {
        let j = Job {
            cluster: "c".into(),
            job_id: "1_2".into(),
            job_id_raw: "5".into(),
            state: "COMPLETED".into(),
            max_rss_mb: Some(12.5),
            is_final: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        write_tagged(&mut out, "job", &j).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("{\"kind\":\"job\""), "{text}");
        assert!(!text.contains("mem_eff"), "absent stays absent: {text}");
        assert!(text.contains("\"start\":null"));
        let back: Job = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j);
        assert_eq!(peek_kind(&text).as_deref(), Some("job"));
    }

    #[test]
    fn the_tables_follow_the_structs_on_the_wire() {
        use crate::fields::{Kind, Value as V};
        let mut j = Job::default();
        for (i, c) in Job::COLUMNS.iter().enumerate() {
            let text = format!("2026-01-{:02}T00:00:00Z", i + 1);
            let v = match c.field.kind {
                Kind::Text | Kind::Time => V::Text(Some(&text)),
                Kind::Int => V::Int(Some(i as i64)),
                Kind::Real => V::Real(Some(i as f64 + 0.5)),
                Kind::Bool => V::Bool(true),
            };
            (c.set)(&mut j, v).unwrap();
            assert_eq!((c.get)(&j), v, "{}", c.field.name);
        }
        let text = serde_json::to_string(&j).unwrap();
        let at: Vec<Option<usize>> = Job::FIELDS
            .iter()
            .map(|f| text.find(&format!("\"{}\":", f.name)))
            .collect();
        assert!(
            at.iter().all(Option::is_some),
            "every field written: {text}"
        );
        assert!(at.windows(2).all(|w| w[0] < w[1]), "in table order: {text}");
        let names: Vec<&str> = Sample::COLUMNS.iter().map(|c| c.field.name).collect();
        assert_eq!(names.len(), 32);
        assert_eq!(names[..4], ["t", "host", "job_id", "rss_mb"]);
        // Issue 22: the page cache comes last, after the fields before it.
        assert_eq!(names[31], "page_cache_mb");
        assert!(Job::FIELDS.iter().all(|f| !f.doc.is_empty()));
    }

    #[test]
    fn summary_keeps_extra_totals() {
        let text = r#"{"kind":"summary","job_id":"9","peak_rss_mb":3.0,"read_mb":7.5}"#;
        let s: Summary = serde_json::from_str(text).unwrap();
        assert_eq!(s.peak_rss_mb, Some(3.0));
        assert_eq!(s.extra.get("read_mb"), Some(&Value::from(7.5)));
    }
}
