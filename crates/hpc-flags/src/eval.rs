//! What is known about one job, and the fourteen flag rules.

use hpc_core::record::Flag;

use crate::thresholds::Thresholds;

/// The flags in output order: name and category.
pub const FLAGS: [(&str, &str); 14] = [
    ("oom_killed", "misuse"),
    ("mem_overrequest", "misuse"),
    ("idle_cpu", "misuse"),
    ("single_threaded", "misuse"),
    ("mem_spike_plateau", "misuse"),
    ("io_dominant", "I/O"),
    ("lustre_metadata_heavy", "I/O"),
    ("lustre_io_dominant", "I/O"),
    ("high_cpi", "hardware"),
    ("cache_thrashing", "hardware"),
    ("numa_misplaced", "hardware"),
    ("catastrophe", "hardware"),
    ("node_imbalance", "multi-node"),
    ("idle_nodes", "multi-node"),
];

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
    #[serde(default)]
    pub lustre_meta_ops: Option<f64>,
    #[serde(default)]
    pub cpi: Option<f64>,
    #[serde(default)]
    pub cache_miss_rate: Option<f64>,
    #[serde(default)]
    pub numa_miss_rate: Option<f64>,
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

/// What the evaluation found.
pub struct Outcome {
    pub flags: Vec<Flag>,
    pub not_evaluated: Vec<String>,
}

fn some(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// A sample series sorted by time, with each sample's duration.
struct Series {
    p: Vec<Point>,
    dt: Vec<f64>,
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
    fn share(&self, get: impl Fn(&Point) -> Option<bool>) -> Option<f64> {
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
    fn mean(&self, get: impl Fn(&Point) -> f64) -> Option<f64> {
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

struct Eval<'a> {
    th: &'a Thresholds,
    job_id: &'a str,
    out: Outcome,
}

impl Eval<'_> {
    /// Records a rule's result: `None` = inputs missing (not evaluated);
    /// `Some((raised, value, threshold, reason))`.
    fn rule(&mut self, flag: &str, r: Option<(bool, Option<f64>, Option<f64>, String)>) {
        let category = FLAGS
            .iter()
            .find(|(f, _)| *f == flag)
            .map(|(_, c)| *c)
            .unwrap_or("");
        match r {
            None => self.out.not_evaluated.push(flag.to_owned()),
            Some((true, value, threshold, reason)) => self.out.flags.push(Flag {
                job_id: self.job_id.to_owned(),
                flag: flag.to_owned(),
                category: category.to_owned(),
                value: value.map(round6),
                threshold,
                reason,
            }),
            Some((false, ..)) => {}
        }
    }

    /// A "mean above threshold" rule.
    fn above(&mut self, flag: &str, v: Option<f64>, what: &str) {
        let th = self.th.get(flag);
        let r = v.map(|v| {
            (
                v > th,
                Some(v),
                Some(th),
                format!("mean {what} {} > {th}", round3(v)),
            )
        });
        self.rule(flag, r);
    }
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn round3(v: f64) -> f64 {
    (v * 1e3).round() / 1e3
}

/// Applies the fourteen rules to what is known about the job.
pub fn evaluate(job_id: &str, acc: JobAcc, th: &Thresholds) -> Outcome {
    let points = if !acc.series.is_empty() {
        acc.series
    } else if !acc.many_hosts {
        acc.host_series
    } else {
        Vec::new()
    };
    let s = Series::new(points);
    let job = acc.job.unwrap_or_default();
    let sum = acc.summary.unwrap_or_default();
    let alloc = job
        .alloc_cpus
        .or(sum.req_cpus)
        .or(acc.meta_cpus)
        .filter(|a| *a > 0.0);
    let frac =
        |p: &Point| some(p.frac).or_else(|| alloc.and_then(|a| some(p.cores).map(|c| c / a)));
    let mut e = Eval {
        th,
        job_id,
        out: Outcome {
            flags: Vec::new(),
            not_evaluated: Vec::new(),
        },
    };

    // oom_killed
    let r = job.state.as_deref().map(|st| {
        (
            st.starts_with("OUT_OF_MEMORY"),
            None,
            None,
            "the job was killed for running out of memory (state OUT_OF_MEMORY)".to_string(),
        )
    });
    e.rule("oom_killed", r);

    // mem_overrequest
    let sample_peak =
        s.p.iter()
            .map(|p| p.rss)
            .filter(|v| !v.is_nan())
            .reduce(f64::max);
    let peak = [job.max_rss_mb, sum.peak_rss_mb, sample_peak]
        .into_iter()
        .flatten()
        .reduce(f64::max);
    let req = job
        .req_mem_mb
        .or(sum.req_mem_mb)
        .or(acc.meta_mem_mb)
        .filter(|r| *r > 0.0);
    let th_m = th.get("mem_overrequest");
    let r = peak.zip(req).map(|(p, q)| {
        let ratio = p / q;
        (
            ratio < th_m,
            Some(ratio),
            Some(th_m),
            format!(
                "peak RSS {} MiB is {:.1} % of the {} MiB requested",
                round3(p),
                ratio * 100.0,
                round3(q)
            ),
        )
    });
    e.rule("mem_overrequest", r);

    // idle_cpu
    let (th_i, th_if) = (th.get("idle_cpu"), th.get("idle_cpu_frac"));
    let r = s.share(|p| frac(p).map(|f| f < th_if)).map(|sh| {
        (
            sh > th_i,
            Some(sh),
            Some(th_i),
            format!(
                "CPU fraction below {th_if} for {:.1} % of the run",
                sh * 100.0
            ),
        )
    });
    e.rule("idle_cpu", r);

    // single_threaded
    let (th_s, th_sc) = (
        th.get("single_threaded"),
        th.get("single_threaded_min_cpus"),
    );
    let from_job = job.alloc_cpus.zip(job.total_cpu_s).zip(job.elapsed_s);
    let from_sum = sum.req_cpus.zip(sum.cpu_s).zip(sum.duration_s);
    let r = from_job
        .or(from_sum)
        .filter(|((_, _), el)| *el > 0.0)
        .map(|((cpus, cpu), el)| {
            let eff = cpu / el;
            (
                cpus > th_sc && eff < th_s,
                Some(eff),
                Some(th_s),
                format!(
                    "{} effective cores (CPU time / elapsed) on {cpus} CPUs",
                    round3(eff)
                ),
            )
        });
    e.rule("single_threaded", r);

    // mem_spike_plateau
    let th_p = th.get("mem_spike_plateau");
    let th_pw = th.get("mem_spike_plateau_window");
    let rss: Vec<(f64, f64)> =
        s.p.iter()
            .filter(|p| !p.rss.is_nan())
            .map(|p| (p.t, p.rss))
            .collect();
    let r = if rss.len() >= 3 {
        let t0 = rss[0].0;
        let t_end = s.p.last().map(|p| p.t).unwrap_or(t0) + s.dt.last().copied().unwrap_or(0.0);
        let run = t_end - t0;
        let (tp, peak) = rss.iter().fold(
            (t0, f64::NEG_INFINITY),
            |a, &(t, v)| if v > a.1 { (t, v) } else { a },
        );
        let cut = t0 + th_pw * run;
        let later = rss
            .iter()
            .filter(|(t, _)| *t > cut)
            .map(|(_, v)| *v)
            .reduce(f64::max);
        match later {
            Some(l) if peak > 0.0 => {
                let ratio = l / peak;
                Some((
                    tp <= cut && ratio < th_p,
                    Some(ratio),
                    Some(th_p),
                    format!(
                        "RSS peaks at {} MiB {:.0} s into the run, then stays at or below {:.1} % of it",
                        round3(peak),
                        tp - t0,
                        ratio * 100.0
                    ),
                ))
            }
            _ => None,
        }
    } else {
        None
    };
    e.rule("mem_spike_plateau", r);

    // io_dominant, lustre_metadata_heavy, lustre_io_dominant
    let io_rule = |e: &mut Eval, flag: &str, get: fn(&Point) -> f64| {
        let th_d = th.get(flag);
        let th_mb = th.get(&format!("{flag}_mbps"));
        let th_cf = th.get(&format!("{flag}_cpu_frac"));
        let what = if flag == "io_dominant" {
            "disk"
        } else {
            "Lustre"
        };
        let r = s
            .share(|p| {
                let io = some(get(p))?;
                let f = frac(p)?;
                Some(io > th_mb && f < th_cf)
            })
            .map(|sh| {
                (
                    sh > th_d,
                    Some(sh),
                    Some(th_d),
                    format!(
                        "{what} I/O above {th_mb} MB/s with CPU fraction below {th_cf} for {:.1} % of the run",
                        sh * 100.0
                    ),
                )
            });
        e.rule(flag, r);
    };
    io_rule(&mut e, "io_dominant", |p| p.io);
    let lm = sum.lustre_meta_ops.or_else(|| s.mean(|p| p.lustre_meta));
    e.above("lustre_metadata_heavy", lm, "Lustre metadata ops/s");
    io_rule(&mut e, "lustre_io_dominant", |p| p.lustre_io);

    // Means: summary first, else the series.
    let cpi = sum.cpi.or_else(|| s.mean(|p| p.cpi));
    e.above("high_cpi", cpi, "cycles per instruction");
    let cache = sum.cache_miss_rate.or_else(|| s.mean(|p| p.cache));
    e.above("cache_thrashing", cache, "cache misses per reference");
    let numa = sum.numa_miss_rate.or_else(|| s.mean(|p| p.numa));
    e.above("numa_misplaced", numa, "NUMA miss rate");

    // catastrophe
    let th_c = th.get("catastrophe");
    let use_cores = s.p.iter().any(|p| !p.cores.is_nan());
    let (mut ct, mut cx, mut cw) = (Vec::new(), Vec::new(), Vec::new());
    for (p, d) in s.p.iter().zip(&s.dt) {
        let v = if use_cores {
            some(p.cores)
        } else {
            some(p.frac)
        };
        if let Some(v) = v {
            ct.push(p.t);
            cx.push(v);
            cw.push(*d);
        }
    }
    let run: f64 = cw.iter().sum();
    let min_dur = th
        .get("catastrophe_min_s")
        .max(th.get("catastrophe_min_share") * run);
    let r = if cx.len() >= 4 {
        match change_point(&ct, &cx, &cw, th.get("catastrophe_start_share"), min_dur) {
            Some((ratio, gain, tail, split)) => Some((
                ratio < th_c && tail < th_c && gain > th.get("catastrophe_gain"),
                Some(ratio),
                Some(th_c),
                format!(
                    "CPU activity drops to {:.1} % of its earlier level {:.0} s into the run ({:.0} % of it) and does not recover",
                    ratio * 100.0,
                    split - ct[0],
                    (split - ct[0]) / run * 100.0
                ),
            )),
            // Too short for the test: evaluated, nothing to raise.
            None => Some((false, None, None, String::new())),
        }
    } else {
        None
    };
    e.rule("catastrophe", r);

    // node_imbalance
    let th_n = th.get("node_imbalance");
    let r = sum.node_cpu_cv.map(|cv| {
        (
            cv > th_n,
            Some(cv),
            Some(th_n),
            format!(
                "per-node mean busy cores vary with a coefficient of variation of {}",
                round3(cv)
            ),
        )
    });
    e.rule("node_imbalance", r);

    // idle_nodes
    let th_in = th.get("idle_nodes");
    let sum_nodes =
        (!sum.nodes.is_empty()).then(|| (sum.nodes.len() + sum.missing_nodes.len()) as f64);
    let from_job = job
        .total_cpu_s
        .zip(job.nnodes)
        .zip(job.alloc_cpus)
        .zip(job.elapsed_s);
    let from_sum = sum
        .cpu_s
        .zip(sum_nodes)
        .zip(sum.req_cpus)
        .zip(sum.duration_s);
    let r = from_job
        .or(from_sum)
        .filter(|(_, el)| *el > 0.0)
        .map(|(((cpu, nodes), cpus), el)| {
            if nodes <= 1.0 {
                return (false, None, None, String::new());
            }
            let one_node = cpus / nodes * el;
            let share = cpu / one_node;
            (
                share < th_in,
                Some(share),
                Some(th_in),
                format!(
                "{} CPU seconds on {nodes} nodes is {:.1} % of one node's capacity over the run",
                round3(cpu),
                share * 100.0
            ),
            )
        });
    e.rule("idle_nodes", r);
    e.out
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
