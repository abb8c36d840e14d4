//! What is known about one job, and how the rules of [`crate::rules`] are
//! applied to it.

use hpc_core::num::round6;
use hpc_core::record::Flag;

use crate::rules::RULES;
use crate::thresholds::Thresholds;

/// The fields of a `job` record the rules use.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct JobFacts {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub req_mem_mb: Option<f64>,
    #[serde(default)]
    pub max_rss_mb: Option<f64>,
    #[serde(default)]
    pub alloc_cpus: Option<f64>,
    #[serde(default)]
    pub nnodes: Option<f64>,
    #[serde(default)]
    pub elapsed_s: Option<f64>,
    #[serde(default)]
    pub total_cpu_s: Option<f64>,
    #[serde(default)]
    pub alloc_gpus: Option<f64>,
    #[serde(default)]
    pub gpu_util: Option<f64>,
    #[serde(default)]
    pub gpu_mem_max_mb: Option<f64>,
    #[serde(default)]
    pub mem_eff: Option<f64>,
    #[serde(default)]
    pub is_final: Option<bool>,
}

/// The shortest run whose sampled accounting figures (MaxRSS, GPU
/// utilisation and memory) the rules read, seconds: SLURM gathers them
/// every JobAcctGatherFrequency, 30 s by default, so a shorter job's are
/// one reading or none (MaxRSS 0, a GPU at 0 %).
pub const ACCT_SAMPLED_MIN_S: f64 = 30.0;

impl JobFacts {
    /// Leaves out what the record cannot tell: a job still running has the
    /// usage of its finished steps only (TotalCPU and MaxRSS are filled in
    /// as steps end), so none of it is read; a job shorter than
    /// [`ACCT_SAMPLED_MIN_S`] has no sampled figures; MaxRSS 0 is no
    /// reading (a process holds some memory).
    fn known(mut self) -> JobFacts {
        if self.is_final == Some(false) {
            self.total_cpu_s = None;
            self.mem_eff = None;
            self.max_rss_mb = None;
            self.gpu_util = None;
            self.gpu_mem_max_mb = None;
        }
        if self.elapsed_s.is_some_and(|e| e < ACCT_SAMPLED_MIN_S) {
            self.max_rss_mb = None;
            self.mem_eff = None;
            self.gpu_util = None;
            self.gpu_mem_max_mb = None;
        }
        if self.max_rss_mb == Some(0.0) {
            self.max_rss_mb = None;
        }
        self
    }

    /// The job's peak memory over all its tasks, MiB: its memory
    /// efficiency times its request (MaxRSS x tasks on a node, as
    /// hpc-ingest counts it), else MaxRSS (one task's peak).
    pub fn used_mem_mb(&self) -> Option<f64> {
        self.mem_eff
            .zip(self.req_mem_mb)
            .map(|(e, r)| e / 100.0 * r)
            .or(self.max_rss_mb)
    }
}

/// One GPU of a job-wide `summary` (hpc-merge's `gpus`).
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct GpuFacts {
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub gpu_index: Option<u32>,
    #[serde(default)]
    pub peak_util: Option<f64>,
    #[serde(default)]
    pub peak_mem_mb: Option<f64>,
    #[serde(default)]
    pub mem_total_mb: Option<f64>,
    #[serde(default)]
    pub max_procs: Option<u32>,
}

impl GpuFacts {
    /// How the GPU is named in a reason: `host:index`.
    pub fn label(&self) -> String {
        let i = self.gpu_index.map_or("?".into(), |i| i.to_string());
        match &self.host {
            Some(h) => format!("{}:{i}", hpc_core::paths::escaped(h)),
            None => i,
        }
    }
}

/// The fields of a job-wide `summary` the rules use.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct SummaryFacts {
    #[serde(default)]
    pub peak_rss_mb: Option<f64>,
    #[serde(default)]
    pub req_mem_mb: Option<f64>,
    #[serde(default)]
    pub req_cpus: Option<f64>,
    #[serde(default)]
    pub cpu_s: Option<f64>,
    #[serde(default)]
    pub duration_s: Option<f64>,
    #[serde(default)]
    pub node_cpu_cv: Option<f64>,
    #[serde(default)]
    pub nodes: Vec<String>,
    #[serde(default)]
    pub missing_nodes: Vec<String>,
    /// Each node's peak RSS, MiB (hpc-merge's job-wide summary).
    #[serde(default)]
    pub peak_rss_mb_by_node: std::collections::BTreeMap<String, f64>,
    /// Each node's high-water mark, MiB: the kernel's, which a spike
    /// between two samples still reaches (hpc-merge's job-wide summary).
    #[serde(default)]
    pub hwm_mb_by_node: std::collections::BTreeMap<String, f64>,
    #[serde(default)]
    pub lustre_meta_ops: Option<f64>,
    #[serde(default)]
    pub cpi: Option<f64>,
    #[serde(default)]
    pub cache_miss_rate: Option<f64>,
    #[serde(default)]
    pub numa_miss_rate: Option<f64>,
    #[serde(default)]
    pub gpus: Vec<GpuFacts>,
}

/// One sample's values (NaN = absent).
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub t: f64,
    pub frac: f64,
    pub cores: f64,
    pub rss: f64,
    pub io: f64,
    pub lustre_io: f64,
    pub lustre_meta: f64,
    pub cpi: f64,
    pub cache: f64,
    pub numa: f64,
    pub gpu_util: f64,
    pub gpu_mem: f64,
    pub gpu_mem_total: f64,
}

/// Everything gathered for one job.
#[derive(Debug, Default)]
pub struct JobAcc {
    pub job: Option<JobFacts>,
    pub summary: Option<SummaryFacts>,
    /// Sums of the metas' requests, for raw probe streams.
    pub meta_cpus: Option<f64>,
    pub meta_mem_mb: Option<f64>,
    /// The job-wide series (samples without `host`).
    pub series: Vec<Point>,
    /// Samples of the only host seen, used when there is no job-wide series.
    pub host_series: Vec<Point>,
    pub host: Option<String>,
    pub many_hosts: bool,
}

impl JobAcc {
    /// Adds a sample: to the job-wide series without `host`, else to the
    /// host series while only one host has been seen.
    pub fn add_sample(&mut self, host: Option<&str>, p: Point) {
        match host {
            None => self.series.push(p),
            Some(_) if self.many_hosts => {}
            Some(h) => match &self.host {
                None => {
                    self.host = Some(h.to_owned());
                    self.host_series.push(p);
                }
                Some(cur) if cur == h => self.host_series.push(p),
                Some(_) => {
                    self.many_hosts = true;
                    self.host_series = Vec::new();
                }
            },
        }
    }

    /// Adds a meta's requests to the sums.
    pub fn add_meta(&mut self, cpus: Option<f64>, mem_mb: Option<f64>) {
        if let Some(c) = cpus {
            self.meta_cpus = Some(self.meta_cpus.unwrap_or(0.0) + c);
        }
        if let Some(m) = mem_mb {
            self.meta_mem_mb = Some(self.meta_mem_mb.unwrap_or(0.0) + m);
        }
    }
}

/// What the evaluation found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub flags: Vec<Flag>,
    /// The flags whose inputs were absent, in table order.
    pub not_evaluated: Vec<String>,
}

/// What the rules see of one job: its records and its sample series.
pub struct Facts {
    pub job: JobFacts,
    pub summary: SummaryFacts,
    /// The metas' summed memory request, for raw probe streams.
    pub meta_mem_mb: Option<f64>,
    /// The allocated CPUs (job, else summary, else metas), when above 0.
    pub alloc_cpus: Option<f64>,
    /// The job-wide series, else the only host's.
    pub series: Series,
}

impl Facts {
    /// Gathers what the rules read from what was collected for a job.
    pub fn new(acc: JobAcc) -> Facts {
        let points = if !acc.series.is_empty() {
            acc.series
        } else if !acc.many_hosts {
            acc.host_series
        } else {
            Vec::new()
        };
        let job = acc.job.unwrap_or_default().known();
        let summary = acc.summary.unwrap_or_default();
        let alloc_cpus = job
            .alloc_cpus
            .or(summary.req_cpus)
            .or(acc.meta_cpus)
            .filter(|a| *a > 0.0);
        Facts {
            job,
            summary,
            meta_mem_mb: acc.meta_mem_mb,
            alloc_cpus,
            series: Series::new(points),
        }
    }

    /// Whether the job has GPUs: allocated ones (the job record), or GPU
    /// readings in its summary or samples. The GPU rules leave a job
    /// without any quiet rather than not evaluated.
    pub fn has_gpus(&self) -> bool {
        self.job.alloc_gpus.is_some_and(|g| g > 0.0)
            || self.job.gpu_util.is_some()
            || self.job.gpu_mem_max_mb.is_some()
            || !self.summary.gpus.is_empty()
            || self
                .series
                .p
                .iter()
                .any(|p| !(p.gpu_util.is_nan() && p.gpu_mem.is_nan()))
    }

    /// A sample's CPU fraction: its `cpu_frac`, else its busy cores over
    /// the allocated CPUs.
    pub fn frac(&self, p: &Point) -> Option<f64> {
        some(p.frac).or_else(|| self.alloc_cpus.and_then(|a| some(p.cores).map(|c| c / a)))
    }
}

/// `v` unless it is NaN (absent).
pub fn some(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// Applies every rule of [`RULES`] to what is known about the job.
pub fn evaluate(job_id: &str, acc: JobAcc, th: &Thresholds) -> Outcome {
    let facts = Facts::new(acc);
    let mut out = Outcome::default();
    for rule in RULES {
        match (rule.test)(&facts, th) {
            None => out.not_evaluated.push(rule.flag.to_owned()),
            // Inputs whose sum or mean overflows (values near f64's limit)
            // measure nothing: not a flag with a value of null or inf.
            Some(v) if v.value.is_some_and(|x| !x.is_finite()) => {
                out.not_evaluated.push(rule.flag.to_owned())
            }
            Some(v) if v.raised => out.flags.push(Flag {
                job_id: job_id.to_owned(),
                flag: rule.flag.to_owned(),
                category: rule.category.name().to_owned(),
                value: v.value.map(round6),
                threshold: v.threshold,
                reason: v.reason,
            }),
            Some(_) => {}
        }
    }
    out
}

/// A sample series sorted by time, with each sample's duration.
pub struct Series {
    /// The samples, by time, one per time stamp.
    pub p: Vec<Point>,
    /// Each sample's duration: the time to the next one; the last lasts
    /// as long as the median one.
    pub dt: Vec<f64>,
}

impl Series {
    fn new(mut p: Vec<Point>) -> Self {
        p.sort_by(|a, b| a.t.total_cmp(&b.t));
        p.dedup_by(|a, b| a.t == b.t);
        let n = p.len();
        let mut dt: Vec<f64> = p.windows(2).map(|w| w[1].t - w[0].t).collect();
        // The last sample lasts as long as a typical one.
        let mut sorted = dt.clone();
        sorted.sort_by(f64::total_cmp);
        let typical = sorted.get(sorted.len() / 2).copied().unwrap_or(1.0);
        if n > 0 {
            dt.push(if typical > 0.0 { typical } else { 1.0 });
        }
        Series { p, dt }
    }

    /// The share of time (over samples where `get` is present) for which
    /// `pred` holds; `None` when no sample has the inputs.
    pub fn share(&self, get: impl Fn(&Point) -> Option<bool>) -> Option<f64> {
        let (mut yes, mut all) = (0.0, 0.0);
        for (p, dt) in self.p.iter().zip(&self.dt) {
            if let Some(b) = get(p) {
                all += dt;
                if b {
                    yes += dt;
                }
            }
        }
        (all > 0.0).then(|| yes / all)
    }

    /// Time-weighted mean of a field.
    pub fn mean(&self, get: impl Fn(&Point) -> f64) -> Option<f64> {
        let (mut s, mut w) = (0.0, 0.0);
        for (p, dt) in self.p.iter().zip(&self.dt) {
            let v = get(p);
            if !v.is_nan() {
                s += v * dt;
                w += dt;
            }
        }
        (w > 0.0).then(|| s / w)
    }
}

/// The change-point test behind `catastrophe`: the best two-segment
/// least-squares fit of `x` (weighted by sample durations) over all split
/// points that leave the first `start_share` of the run to the first
/// segment and at least `min_dur` seconds to the second. Returns
/// `(ratio, gain, tail_ratio, split_t)`: the later mean over the earlier
/// mean, the fit's improvement in noise variances, the mean of the final
/// `min_dur` seconds over the earlier mean, and where the split is.
pub fn change_point(
    t: &[f64],
    x: &[f64],
    w: &[f64],
    start_share: f64,
    min_dur: f64,
) -> Option<(f64, f64, f64, f64)> {
    let n = x.len();
    if n < 4 {
        return None;
    }
    let total: f64 = w.iter().sum();
    let mean_w = total / n as f64;
    // Prefix sums of normalised weights, w*x, w*x^2.
    let mut pw = vec![0.0; n + 1];
    let mut px = vec![0.0; n + 1];
    let mut pq = vec![0.0; n + 1];
    for i in 0..n {
        let wi = w[i] / mean_w;
        pw[i + 1] = pw[i] + wi;
        px[i + 1] = px[i] + wi * x[i];
        pq[i + 1] = pq[i] + wi * x[i] * x[i];
    }
    let sse = |a: usize, b: usize| {
        let (sw, sx, sq) = (pw[b] - pw[a], px[b] - px[a], pq[b] - pq[a]);
        if sw <= 0.0 {
            0.0
        } else {
            (sq - sx * sx / sw).max(0.0)
        }
    };
    let t0 = t[0];
    let t_end = t[n - 1] + w[n - 1];
    let mut best: Option<(usize, f64)> = None;
    for (j, &tj) in t.iter().enumerate().skip(1) {
        if tj - t0 < start_share * total || t_end - tj < min_dur {
            continue;
        }
        let s = sse(0, j) + sse(j, n);
        if best.map_or(true, |(_, b)| s < b) {
            best = Some((j, s));
        }
    }
    let (j, s2) = best?;
    let s1 = sse(0, n);
    let m1 = (px[j] - px[0]) / (pw[j] - pw[0]);
    let m2 = (px[n] - px[j]) / (pw[n] - pw[j]);
    if m1 <= 0.0 {
        return None;
    }
    let noise = (s2 / (n as f64 - 2.0)).max((0.01 * m1).powi(2));
    let gain = (s1 - s2) / noise;
    // The final stretch: does the activity come back?
    let tail_from = t_end - min_dur;
    let k = t.partition_point(|&ti| ti < tail_from).min(n - 1);
    let tail = (px[n] - px[k]) / (pw[n] - pw[k]);
    Some((m2 / m1, gain, tail / m1, t[j]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_point_finds_a_drop_at_forty_percent() {
        let n = 200;
        let t: Vec<f64> = (0..n).map(|i| i as f64 * 10.0).collect();
        let x: Vec<f64> = (0..n).map(|i| if i < 80 { 8.0 } else { 0.1 }).collect();
        let w = vec![10.0; n];
        let (ratio, gain, tail, split) = change_point(&t, &x, &w, 0.1, 200.0).unwrap();
        assert!(
            ratio < 0.02 && tail < 0.02 && gain > 1000.0,
            "{ratio} {gain}"
        );
        assert_eq!(split, 800.0);
    }

    #[test]
    fn change_point_respects_the_start_share() {
        let t: Vec<f64> = (0..100).map(f64::from).collect();
        let x: Vec<f64> = (0..100).map(|i| if i < 5 { 8.0 } else { 0.0 }).collect();
        let w = vec![1.0; 100];
        let (_, _, _, split) = change_point(&t, &x, &w, 0.1, 10.0).unwrap();
        assert!(split >= 10.0);
    }
}
