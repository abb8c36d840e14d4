//! Combining nodes: clock alignment, folding into the job-wide sums,
//! writing the aggregate series and the summaries.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Mutex;

use hpc_core::num::round6;
use hpc_core::paths::{escaped, shown};
use hpc_core::record::{write_tagged, Summary};
use hpc_core::{Error, Result};
use serde_json::{Map, Value};

use crate::bins::{
    Aggregate, Kind, CACHE, CORES, CPI, CPU_SYS, CPU_USER, ENERGY, FIELDS, LMETA, LREAD, LWRITE,
    MAX_JOB_BINS, MAX_SPAN_S, NF, NUMA, POWER, READ_MB, READ_MBPS, RSS, WRITE_MB, WRITE_MBPS,
};
use crate::input::NodeData;
use crate::Opts;

/// Idle node threshold: mean busy cores below this share of its CPUs.
const IDLE_SHARE: f64 = 0.05;
/// ... or below this many cores.
const IDLE_CORES: f64 = 0.05;

/// What one node contributed, kept after its bins are dropped.
pub(crate) struct NodeStat {
    host: String,
    has_samples: bool,
    summary: Summary,
    mean_cores: Option<f64>,
    req_cpus: Option<u32>,
    req_mem_mb: Option<f64>,
    cpu_s: Option<f64>,
    cpu_cumulative: bool,
    totals: [Option<f64>; TOTAL_NAMES.len()],
    /// Sampling times after the clock shift.
    t_min: f64,
    t_max: f64,
}

/// Indexes into `NodeStat::totals`.
const T_READ: usize = 0;
const T_WRITE: usize = 1;
const T_LREAD: usize = 2;
const T_LWRITE: usize = 3;
const T_ENERGY: usize = 4;
const TOTAL_NAMES: [&str; 5] = [
    "read_mb",
    "write_mb",
    "lustre_read_mb",
    "lustre_write_mb",
    "energy_j",
];

/// Which input each host's samples were taken from: a host given twice
/// (the same file twice, a copy, two files with its samples) is merged
/// once, from the input that claimed it first.
pub(crate) struct Hosts<'a> {
    names: &'a [String],
    taken: Mutex<HashMap<String, usize>>,
}

impl<'a> Hosts<'a> {
    /// `names`: the inputs, by index.
    pub fn new(names: &'a [String]) -> Self {
        Hosts {
            names,
            taken: Mutex::new(HashMap::new()),
        }
    }

    /// True when `host`'s samples from input `index` are merged; false,
    /// with a warning, when another input gave them already.
    pub fn claim(&self, host: &str, index: usize) -> bool {
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        let first = *taken.entry(host.to_owned()).or_insert(index);
        if first == index {
            return true;
        }
        let name = |i: usize| shown(std::path::Path::new(&self.names[i]));
        hpc_core::note!(
            "hpc-merge: {}: host {} was already read from {}: merged once, not summed",
            name(index),
            escaped(host),
            name(first)
        );
        false
    }
}

/// The start a node is aligned by: its meta's start when that lies within
/// the window of its samples, else its first sample time.
fn own_start(n: &NodeData) -> Option<f64> {
    let b = &n.bins;
    let meta = n.meta.as_ref().map(|m| m.start);
    match (meta, b.anchor()) {
        (Some(s), Some(a)) if (s - a).abs() <= MAX_SPAN_S => Some(s),
        (Some(s), None) if s.is_finite() => Some(s),
        _ => (b.samples > 0).then_some(b.t_min),
    }
}

pub(crate) struct Combiner<'a> {
    opts: &'a Opts,
    hosts: &'a Hosts<'a>,
    step: f64,
    origin: Option<f64>,
    agg: Aggregate,
    pending: Vec<NodeData>,
    stats: Vec<NodeStat>,
    /// Index in `stats` by host.
    stat_of: HashMap<String, usize>,
    max_median: f64,
    meta_job_id: Option<String>,
    sample_job_id: Option<String>,
    meta_nnodes: Option<u32>,
    gpus: crate::gpus::GpuStats,
}

/// Appends a number, rounded to 6 decimals; whole numbers without a fraction.
fn push_num(line: &mut String, v: f64) {
    use std::fmt::Write as _;
    let v = round6(v);
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(line, "{}", v as i64);
    } else {
        line.push_str(ryu::Buffer::new().format_finite(v));
    }
}

fn num(v: f64) -> Value {
    serde_json::Number::from_f64(round6(v)).map_or(Value::Null, Value::Number)
}

/// Sums and counts of a node's held values, per field.
struct Acc {
    sum: [f64; NF],
    n: [u64; NF],
    /// Each field's first value (NaN: none): for a cumulative counter, what
    /// it held when the node's first sample was taken.
    first: [f64; NF],
    /// Each field's last value (NaN: none): a rate's stands for the whole
    /// interval before the last sample, of which its bin is one step.
    last: [f64; NF],
}

impl Acc {
    fn new() -> Self {
        Acc {
            sum: [0.0; NF],
            n: [0; NF],
            first: [f64::NAN; NF],
            last: [f64::NAN; NF],
        }
    }
    fn mean(&self, k: usize) -> Option<f64> {
        (self.n[k] > 0).then(|| self.sum[k] / self.n[k] as f64)
    }
    fn total(&self, k: usize) -> Option<f64> {
        (self.n[k] > 0).then_some(self.sum[k])
    }
}

impl<'a> Combiner<'a> {
    pub fn new(opts: &'a Opts, hosts: &'a Hosts<'a>, step: f64, origin: Option<f64>) -> Self {
        Combiner {
            opts,
            hosts,
            step,
            origin,
            agg: Aggregate::new(),
            pending: Vec::new(),
            stats: Vec::new(),
            stat_of: HashMap::new(),
            max_median: 0.0,
            meta_job_id: None,
            sample_job_id: None,
            meta_nnodes: None,
            gpus: crate::gpus::GpuStats::default(),
        }
    }

    /// Takes a node that has been read completely from input `index`.
    pub fn add_node(&mut self, n: NodeData, index: usize) -> Result<()> {
        self.note(&n);
        if n.bins.samples > 0 && !self.hosts.claim(&n.host, index) {
            n.bins.recycle();
            return Ok(());
        }
        if self.origin.is_some() {
            self.fold(n)?;
        } else {
            self.pending.push(n);
        }
        Ok(())
    }

    /// Notes a line passed through unchanged (the probe's `gpu` records
    /// feed the summary's per-GPU statistics).
    pub fn note_passthrough(&mut self, line: &str) {
        self.gpus.add_line(line);
    }

    /// Notes a node's job id and node count (before it is folded).
    pub fn note(&mut self, n: &NodeData) {
        if let Some(m) = &n.meta {
            if self.meta_job_id.is_none() {
                self.meta_job_id = m.job_id.clone();
            }
            if let Some(nn) = m.nnodes {
                self.meta_nnodes = Some(self.meta_nnodes.unwrap_or(0).max(nn));
            }
        }
        if self.sample_job_id.is_none() {
            self.sample_job_id = n.sample_job_id.clone();
        }
    }

    fn job_id(&self) -> String {
        self.opts
            .job_id
            .clone()
            .or_else(|| self.meta_job_id.clone())
            .or_else(|| self.sample_job_id.clone())
            .unwrap_or_default()
    }

    /// Adds one node's held series into the job-wide sums.
    fn fold(&mut self, n: NodeData) -> Result<()> {
        let origin = self.origin.unwrap_or(0.0);
        let (stat, median) = fold_node(self.opts, self.step, origin, &mut self.agg, n)?;
        self.add_folded(stat, median);
        Ok(())
    }

    /// Takes a node already folded (by a reader thread, into its own sums).
    /// A host is counted once: a node without samples (a meta alone) gives
    /// way to one with samples.
    pub fn add_folded(&mut self, stat: NodeStat, median: f64) {
        self.max_median = self.max_median.max(median);
        match self.stat_of.get(&stat.host) {
            Some(&i) if stat.has_samples && !self.stats[i].has_samples => self.stats[i] = stat,
            Some(_) => {}
            None => {
                self.stat_of.insert(stat.host.clone(), self.stats.len());
                self.stats.push(stat);
            }
        }
    }

    /// Adds a reader thread's sums.
    pub fn merge_agg(&mut self, other: &Aggregate) -> Result<()> {
        if !self.agg.merge(other) {
            return Err(too_long());
        }
        Ok(())
    }

    /// Folds what is left, writes the series and the summaries. Returns the
    /// number of aggregate samples and of nodes with data.
    pub fn finish(mut self, out: &mut impl Write) -> Result<(u64, usize)> {
        self.fold_pending()?;
        let job_id = self.job_id();
        let job_json = serde_json::to_string(&job_id)?;
        let k: i64 = if self.opts.grid.is_some() {
            1
        } else {
            (self.max_median.round() as i64).max(1)
        };
        let grid_s = self.step * k as f64;
        let alloc = self.alloc();
        let series = self.write_series(out, k, grid_s, &job_json, alloc)?;
        if self.stats.is_empty() && self.opts.nodes.is_empty() && self.opts.expect_nodes.is_none() {
            return Ok((series.samples, 0));
        }
        let job = self.job_summary(job_id.clone(), &series, alloc, grid_s);
        write_tagged(out, "summary", &job)?;
        let count = self.write_node_summaries(out, &job_id)?;
        Ok((series.samples, count))
    }

    /// Folds the nodes held back until the job's earliest start was known.
    fn fold_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let o = self.pending.iter().filter_map(own_start).reduce(f64::min);
        self.origin = Some(o.unwrap_or(0.0));
        for n in std::mem::take(&mut self.pending) {
            self.fold(n)?;
        }
        Ok(())
    }

    /// The job's allocated CPUs: `--cpus`, else the sum of the nodes' metas.
    fn alloc(&self) -> Option<f64> {
        self.opts.cpus.map(f64::from).or_else(|| {
            let s: u32 = self.stats.iter().filter_map(|n| n.req_cpus).sum();
            (s > 0).then_some(s as f64)
        })
    }

    /// Writes the aggregate series, `k` fine bins to an output point, and
    /// gathers the job-wide statistics over the fine bins.
    fn write_series(
        &self,
        out: &mut impl Write,
        k: i64,
        grid_s: f64,
        job_json: &str,
        alloc: Option<f64>,
    ) -> Result<Series> {
        let mut series = Series {
            fine: Acc::new(),
            peak_rss: f64::NAN,
            samples: 0,
        };
        let mut cb = Coarse::new();
        let mut cur_ci: Option<i64> = None;
        let mut line = String::with_capacity(512);
        for i in 0..self.agg.len() {
            let abs = self.agg.base() + i as i64;
            let ci = abs.div_euclid(k);
            if cur_ci != Some(ci) {
                if let Some(c) = cur_ci {
                    series.samples +=
                        cb.write(out, &mut line, c as f64 * grid_s, job_json, alloc)?;
                }
                cb.reset();
                cur_ci = Some(ci);
            }
            let (s, c) = self.agg.bin(i);
            cb.add(s, c);
            series.add_fine(s, c);
        }
        if let Some(c) = cur_ci {
            series.samples += cb.write(out, &mut line, c as f64 * grid_s, job_json, alloc)?;
        }
        Ok(series)
    }

    /// Expected nodes without samples: those of `--nodes` not present,
    /// else the hosts seen without samples and the unknown rest of the
    /// expected count.
    fn missing_nodes(&self, present: &[String]) -> Vec<String> {
        if !self.opts.nodes.is_empty() {
            return self
                .opts
                .nodes
                .iter()
                .filter(|n| !present.contains(n))
                .cloned()
                .collect();
        }
        let mut missing: Vec<String> = self
            .stats
            .iter()
            .filter(|n| !n.has_samples && !present.contains(&n.host))
            .map(|n| n.host.clone())
            .collect();
        missing.sort();
        missing.dedup();
        if let Some(want) = self.opts.expect_nodes.or(self.meta_nnodes) {
            let known = present.len() + missing.len();
            for i in known..want as usize {
                missing.push(format!("unknown-{}", i + 1 - present.len()));
            }
        }
        missing
    }

    /// The job-wide summary.
    fn job_summary(
        &self,
        job_id: String,
        series: &Series,
        alloc: Option<f64>,
        grid_s: f64,
    ) -> Summary {
        let with_data: Vec<&NodeStat> = self.stats.iter().filter(|n| n.has_samples).collect();
        let mut present: Vec<String> = with_data.iter().map(|n| n.host.clone()).collect();
        present.sort();
        present.dedup();
        let missing = self.missing_nodes(&present);
        let mut extra = Map::new();
        insert_node_peaks_and_totals(&mut extra, &with_data);
        insert_means(&mut extra, &series.fine);
        self.gpus.insert_into(&mut extra);
        let (node_cpu_cv, idle) = node_spread(&with_data);
        if let Some(idle) = idle {
            extra.insert("idle_nodes".into(), Value::Array(idle));
        }
        let (cpu_s, src) = job_cpu_s(&with_data);
        if let Some(src) = src {
            extra.insert("cpu_s_source".into(), src.into());
        }
        self.insert_requests(&mut extra, &with_data, alloc);
        extra.insert("grid_s".into(), num(grid_s));
        extra.insert("samples".into(), series.samples.into());
        let t0 = with_data.iter().map(|n| n.t_min).reduce(f64::min);
        let t1 = with_data.iter().map(|n| n.t_max).reduce(f64::max);
        let peak_rss = series.peak_rss;
        Summary {
            job_id,
            host: None,
            duration_s: t0.zip(t1).map(|(a, b)| round6(b - a)),
            peak_rss_mb: (!peak_rss.is_nan()).then(|| round6(peak_rss)),
            mean_rss_mb: series.fine.mean(RSS).map(round6),
            cpu_s: cpu_s.map(round6),
            mean_cpu_cores: job_mean_cores(&with_data, t0.zip(t1))
                .or_else(|| series.fine.mean(CORES))
                .map(round6),
            node_cpu_cv,
            nodes: present,
            missing_nodes: missing,
            series: self.opts.series_path.clone(),
            not_evaluated: Vec::new(),
            extra,
        }
    }

    /// Adds the requested CPUs and memory and the expected node count.
    fn insert_requests(
        &self,
        extra: &mut Map<String, Value>,
        with_data: &[&NodeStat],
        alloc: Option<f64>,
    ) {
        if let Some(a) = alloc {
            extra.insert("req_cpus".into(), num(a));
        }
        let mems: Vec<f64> = with_data.iter().filter_map(|n| n.req_mem_mb).collect();
        if !mems.is_empty() {
            extra.insert("req_mem_mb".into(), num(mems.iter().sum()));
        }
        if let Some(want) = self.opts.expect_nodes.or(self.meta_nnodes) {
            extra.insert("expected_nodes".into(), want.into());
        } else if !self.opts.nodes.is_empty() {
            extra.insert("expected_nodes".into(), self.opts.nodes.len().into());
        }
    }

    /// Writes one summary per node with samples, sorted by host; returns
    /// how many.
    fn write_node_summaries(self, out: &mut impl Write, job_id: &str) -> Result<usize> {
        let mut nodes: BTreeMap<String, Summary> = BTreeMap::new();
        for n in self.stats.into_iter().filter(|n| n.has_samples) {
            let mut s = n.summary;
            s.job_id = job_id.to_owned();
            nodes.insert(n.host, s);
        }
        for s in nodes.values() {
            write_tagged(out, "summary", s)?;
        }
        Ok(nodes.len())
    }
}

/// The job-wide statistics gathered while the series is written.
struct Series {
    /// Per field, the sum and count of the fine bins' values.
    fine: Acc,
    peak_rss: f64,
    /// Output samples written.
    samples: u64,
}

impl Series {
    /// Takes one fine bin: its sums `s` and counts `c` per field.
    fn add_fine(&mut self, s: &[f64], c: &[u16]) {
        for f in 0..NF {
            if c[f] == 0 {
                continue;
            }
            let v = if FIELDS[f].kind == Kind::Ratio {
                s[f] / c[f] as f64
            } else {
                s[f]
            };
            self.fine.sum[f] += v;
            self.fine.n[f] += 1;
        }
        if c[RSS] > 0 && (self.peak_rss.is_nan() || s[RSS] > self.peak_rss) {
            self.peak_rss = s[RSS];
        }
    }
}

/// Adds each node's peak RSS and high-water mark and the job's I/O and
/// energy totals.
fn insert_node_peaks_and_totals(extra: &mut Map<String, Value>, with_data: &[&NodeStat]) {
    let mut by_node = Map::new();
    let mut hwm_by_node = Map::new();
    for n in with_data {
        if let Some(p) = n.summary.peak_rss_mb {
            by_node.insert(n.host.clone(), num(p));
        }
        if let Some(h) = n.summary.extra.get("hwm_mb") {
            hwm_by_node.insert(n.host.clone(), h.clone());
        }
    }
    for (name, map) in [
        ("peak_rss_mb_by_node", by_node),
        ("hwm_mb_by_node", hwm_by_node),
    ] {
        if !map.is_empty() {
            extra.insert(name.into(), Value::Object(map));
        }
    }
    for (ti, name) in TOTAL_NAMES.iter().enumerate() {
        let vals: Vec<f64> = with_data.iter().filter_map(|n| n.totals[ti]).collect();
        if !vals.is_empty() {
            extra.insert((*name).into(), num(vals.iter().sum()));
        }
    }
}

/// Adds the means of the fields reported as means in a summary.
fn insert_means(extra: &mut Map<String, Value>, acc: &Acc) {
    for (name, f) in [
        ("lustre_meta_ops", LMETA),
        ("numa_miss_rate", NUMA),
        ("cpi", CPI),
        ("cache_miss_rate", CACHE),
        ("gpu_util", crate::fields::idx("gpu_util")),
        ("gpu_power_w", crate::fields::idx("gpu_power_w")),
    ] {
        if let Some(v) = acc.mean(f) {
            extra.insert(name.into(), num(v));
        }
    }
}

/// Node imbalance (coefficient of variation of the nodes' mean busy cores)
/// and the idle nodes; `None` for the idle list when no node has a mean.
fn node_spread(with_data: &[&NodeStat]) -> (Option<f64>, Option<Vec<Value>>) {
    let means: Vec<f64> = with_data.iter().filter_map(|n| n.mean_cores).collect();
    if means.is_empty() {
        return (None, None);
    }
    let m = means.iter().sum::<f64>() / means.len() as f64;
    let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / means.len() as f64;
    let cv = (m > 0.0).then(|| round6(var.sqrt() / m));
    let idle: Vec<Value> = with_data
        .iter()
        .filter(|n| {
            n.mean_cores.is_some_and(|c| {
                c < IDLE_CORES || n.req_cpus.is_some_and(|r| c < IDLE_SHARE * f64::from(r))
            })
        })
        .map(|n| Value::from(n.host.clone()))
        .collect();
    (cv, Some(idle))
}

/// The job's busy cores on average over its span `(t0, t1)`: each node's
/// mean over its own sampled span, weighted by that span (a node counts 0
/// outside it); `None` when a node with samples has no mean. The mean of
/// the job-wide bins (before) counted the last interval as one bin and the
/// first as none: 0.62 cores for 0.51 at 5 s sampling.
fn job_mean_cores(with_data: &[&NodeStat], span: Option<(f64, f64)>) -> Option<f64> {
    let (t0, t1) = span.filter(|(a, b)| b > a)?;
    let mut busy = 0.0;
    for n in with_data {
        busy += n.mean_cores? * (n.t_max - n.t_min);
    }
    Some(busy / (t1 - t0))
}

/// The job's CPU seconds over the nodes that have them, and where they
/// came from: cumulative counters, the integral of busy cores, or both.
fn job_cpu_s(with_data: &[&NodeStat]) -> (Option<f64>, Option<&'static str>) {
    let cpu_vals: Vec<&NodeStat> = with_data
        .iter()
        .filter(|n| n.cpu_s.is_some())
        .copied()
        .collect();
    if cpu_vals.is_empty() {
        return (None, None);
    }
    let cpu_s = cpu_vals.iter().filter_map(|n| n.cpu_s).sum::<f64>();
    let src = match cpu_vals.iter().filter(|n| n.cpu_cumulative).count() {
        0 => "integral",
        c if c == cpu_vals.len() => "cumulative",
        _ => "mixed",
    };
    (Some(cpu_s), Some(src))
}

/// One output grid point, gathered from the fine bins inside it.
struct Coarse {
    max: [f64; NF],
    sum: [f64; NF],
    n: [u32; NF],
    /// Running totals of cumulative fields (never reset).
    cum: [f64; NF],
    cum_seen: [bool; NF],
    any: bool,
}

impl Coarse {
    fn new() -> Self {
        Coarse {
            max: [f64::NAN; NF],
            sum: [0.0; NF],
            n: [0; NF],
            cum: [0.0; NF],
            cum_seen: [false; NF],
            any: false,
        }
    }

    fn reset(&mut self) {
        self.max = [f64::NAN; NF];
        self.sum = [0.0; NF];
        self.n = [0; NF];
        self.any = false;
    }

    fn add(&mut self, s: &[f64], c: &[u16]) {
        for f in 0..NF {
            if c[f] == 0 {
                continue;
            }
            self.any = true;
            match FIELDS[f].kind {
                Kind::Level => {
                    if self.max[f].is_nan() || s[f] > self.max[f] {
                        self.max[f] = s[f];
                    }
                }
                Kind::Rate => {
                    self.sum[f] += s[f];
                    self.n[f] += 1;
                }
                Kind::Ratio => {
                    self.sum[f] += s[f] / c[f] as f64;
                    self.n[f] += 1;
                }
                Kind::Cumulative => {
                    self.cum[f] += s[f];
                    self.cum_seen[f] = true;
                }
            }
        }
    }

    /// Writes the grid point as one sample line; returns 1, or 0 when the
    /// point has no data.
    fn write(
        &self,
        out: &mut impl Write,
        line: &mut String,
        t: f64,
        job: &str,
        alloc: Option<f64>,
    ) -> Result<u64> {
        if !self.any {
            return Ok(0);
        }
        line.clear();
        line.push_str("{\"kind\":\"sample\",\"t\":");
        push_num(line, t);
        line.push_str(",\"job_id\":");
        line.push_str(job);
        let mut cores = f64::NAN;
        for (f, fd) in FIELDS.iter().enumerate() {
            let v = match fd.kind {
                Kind::Level => self.max[f],
                Kind::Rate | Kind::Ratio if self.n[f] > 0 => self.sum[f] / self.n[f] as f64,
                Kind::Rate | Kind::Ratio => f64::NAN,
                Kind::Cumulative if self.cum_seen[f] => self.cum[f],
                Kind::Cumulative => f64::NAN,
            };
            if v.is_nan() {
                continue;
            }
            if f == CORES {
                cores = v;
            }
            line.push_str(",\"");
            line.push_str(fd.name);
            line.push_str("\":");
            push_num(line, v);
        }
        if let (false, Some(a)) = (cores.is_nan(), alloc) {
            line.push_str(",\"cpu_frac\":");
            push_num(line, cores / a);
        }
        line.push_str("}\n");
        out.write_all(line.as_bytes())?;
        Ok(1)
    }
}

/// Adds one node's held series into `agg` (clock alignment against the
/// job's earliest start `origin`); returns what the node contributed and its
/// sampling interval.
pub(crate) fn fold_node(
    opts: &Opts,
    step: f64,
    origin: f64,
    agg: &mut Aggregate,
    n: NodeData,
) -> Result<(NodeStat, f64)> {
    let meta = n.meta.as_ref();
    let req_cpus = meta.and_then(|m| m.req_cpus);
    let req_mem_mb = meta.and_then(|m| m.req_mem_mb);
    if n.bins.samples == 0 {
        return Ok((NodeStat::empty(n.host, req_cpus, req_mem_mb), 0.0));
    }
    let place = Placement::of(opts, step, origin, &n);
    let acc = add_held(agg, &n, &place)?;
    let (cpu_s, cpu_cumulative) = node_cpu_s(&acc, step, place.interval);
    let totals = node_totals(&acc, step, place.interval);
    let b = &n.bins;
    // Busy cores on average: with cumulative CPU times, their increase over
    // the sampled span (a probe that reads the processes' CPU only on some
    // samples gives few rates); else the mean of the rates. The increase
    // leaves out what the counters held at the first sample: a probe
    // attached to a process that had run an hour gave 361 cores on 4 CPUs.
    let span = b.t_max - b.t_min;
    let before: f64 = [CPU_USER, CPU_SYS]
        .iter()
        .map(|&k| acc.first[k])
        .filter(|x| !x.is_nan())
        .sum();
    let mean_cores = match (cpu_s, cpu_cumulative) {
        (Some(c), true) if span > 0.0 && acc.n[CORES] > 0 => Some((c - before).max(0.0) / span),
        _ => acc.mean(CORES),
    };
    let mut extra = Map::new();
    for (name, v) in TOTAL_NAMES.iter().zip(totals) {
        if let Some(v) = v {
            extra.insert((*name).into(), num(v));
        }
    }
    insert_means(&mut extra, &acc);
    if cpu_s.is_some() {
        let src = if cpu_cumulative {
            "cumulative"
        } else {
            "integral"
        };
        extra.insert("cpu_s_source".into(), src.into());
    }
    if let Some(r) = req_cpus {
        extra.insert("req_cpus".into(), r.into());
    }
    if let Some(r) = req_mem_mb {
        extra.insert("req_mem_mb".into(), num(r));
    }
    place.insert_into(&mut extra, b.samples, b.duplicates);
    if !b.peak_hwm.is_nan() {
        extra.insert("hwm_mb".into(), num(round6(b.peak_hwm)));
    }
    let summary = Summary {
        job_id: String::new(),
        host: Some(n.host.clone()),
        duration_s: Some(round6(b.t_max - b.t_min)),
        peak_rss_mb: (!b.peak_rss.is_nan()).then(|| round6(b.peak_rss)),
        mean_rss_mb: acc.mean(RSS).map(round6),
        cpu_s: cpu_s.map(round6),
        mean_cpu_cores: mean_cores.map(round6),
        extra,
        ..Default::default()
    };
    let (t_min, t_max) = (b.t_min + place.shift_s, b.t_max + place.shift_s);
    n.bins.recycle();
    Ok((
        NodeStat {
            host: n.host,
            has_samples: true,
            summary,
            mean_cores,
            req_cpus,
            req_mem_mb,
            cpu_s,
            cpu_cumulative,
            totals,
            t_min,
            t_max,
        },
        place.grid_interval,
    ))
}

impl NodeStat {
    /// A node seen without samples (a meta alone).
    fn empty(host: String, req_cpus: Option<u32>, req_mem_mb: Option<f64>) -> Self {
        NodeStat {
            host,
            has_samples: false,
            summary: Summary::default(),
            mean_cores: None,
            req_cpus,
            req_mem_mb,
            cpu_s: None,
            cpu_cumulative: false,
            totals: [None; TOTAL_NAMES.len()],
            t_min: f64::NAN,
            t_max: f64::NAN,
        }
    }
}

/// Where a node's series goes in the job's: its sampling interval, how long
/// a value is held, and its clock shift.
struct Placement {
    interval: f64,
    /// The interval the output grid is chosen by.
    grid_interval: f64,
    hold_s: f64,
    shift_bins: i64,
    shift_s: f64,
}

impl Placement {
    fn of(opts: &Opts, step: f64, origin: f64, n: &NodeData) -> Self {
        let b = &n.bins;
        let median = b.median_interval();
        let interval = median
            .or_else(|| n.meta.as_ref().map(|m| m.interval_s))
            .filter(|i| i.is_finite() && *i > 0.0)
            .unwrap_or(step);
        // Clock skew: the node's own start against the job's earliest.
        let offset = own_start(n).unwrap_or(b.t_min) - origin;
        let threshold = opts.grid.unwrap_or(interval.max(1.0));
        let shift_bins = if offset.abs() > threshold {
            (-offset / step).round() as i64
        } else {
            0
        };
        Placement {
            interval,
            grid_interval: median.unwrap_or(interval),
            hold_s: opts.max_gap * interval.max(step),
            shift_bins,
            shift_s: shift_bins as f64 * step,
        }
    }

    /// Adds the interval, the sample and duplicate counts and the clock
    /// shift to a node summary.
    fn insert_into(&self, extra: &mut Map<String, Value>, samples: u64, duplicates: u64) {
        extra.insert("interval_s".into(), num(self.interval));
        extra.insert("samples".into(), samples.into());
        if duplicates > 0 {
            extra.insert("duplicates".into(), duplicates.into());
        }
        if self.shift_bins != 0 {
            extra.insert("clock_shift_s".into(), num(self.shift_s));
        }
    }
}

/// Adds the node's held values into `agg`, shifted; returns their sums and
/// counts per field.
fn add_held(agg: &mut Aggregate, n: &NodeData, place: &Placement) -> Result<Acc> {
    let b = &n.bins;
    let first = b.base() + place.shift_bins;
    let len = b.len() as i64;
    if !agg.cover(first, first + len - 1) {
        return Err(too_long());
    }
    let mut acc = Acc::new();
    b.walk(place.hold_s, |i, v| {
        agg.add(first + i as i64, v);
        for (k, x) in v.iter().enumerate() {
            let have = !x.is_nan();
            acc.sum[k] = if have { acc.sum[k] + x } else { acc.sum[k] };
            acc.n[k] += u64::from(have);
            if have && acc.first[k].is_nan() {
                acc.first[k] = *x;
            }
            if have {
                acc.last[k] = *x;
            }
        }
    });
    Ok(acc)
}

/// The integral over the node's bins of field `k` (a rate), `step`
/// seconds a bin, and over the rest of its last interval: a rate is held
/// forward from its sample, so the last one covered one bin of the
/// `interval` it stands for (at 5 s sampling, 16 of 20 s: totals 20 % low).
fn integral(acc: &Acc, step: f64, interval: f64, k: usize) -> Option<f64> {
    let tail = if acc.last[k].is_nan() {
        0.0
    } else {
        acc.last[k] * (interval - step).max(0.0)
    };
    acc.total(k).map(|s| s * step + tail)
}

/// A node's CPU seconds: from the cumulative counters when it has them
/// (true), else the integral of busy cores (false).
fn node_cpu_s(acc: &Acc, step: f64, interval: f64) -> (Option<f64>, bool) {
    match (acc.total(CPU_USER), acc.total(CPU_SYS)) {
        (None, None) => (integral(acc, step, interval, CORES), false),
        (u, s) => (Some(u.unwrap_or(0.0) + s.unwrap_or(0.0)), true),
    }
}

/// A node's I/O and energy totals, indexed by the `T_*` constants.
fn node_totals(acc: &Acc, step: f64, interval: f64) -> [Option<f64>; TOTAL_NAMES.len()] {
    let integral = |k: usize| integral(acc, step, interval, k);
    let mut totals = [None; TOTAL_NAMES.len()];
    totals[T_READ] = acc.total(READ_MB).or_else(|| integral(READ_MBPS));
    totals[T_WRITE] = acc.total(WRITE_MB).or_else(|| integral(WRITE_MBPS));
    totals[T_LREAD] = integral(LREAD);
    totals[T_LWRITE] = integral(LWRITE);
    totals[T_ENERGY] = acc.total(ENERGY).or_else(|| integral(POWER));
    totals
}

/// The error when the nodes' series together would be too long.
fn too_long() -> Error {
    Error::Other(format!(
        "the nodes' series span more than {MAX_JOB_BINS} bins together after clock alignment \
         (node files of different times or a bad meta start?): give a coarser --grid or merge \
         the files apart"
    ))
}
