//! The flag rules as data: one [`Rule`] a flag in [`RULES`], each with a
//! small test function. Adding a flag is one entry here, its thresholds in
//! [`crate::thresholds`], its entry in the man page and its raise and
//! near-miss cases in the tests (tests check all four agree).

use crate::eval::{change_point, some, Facts, Point};
use crate::thresholds::{Param, Thresholds};

/// What kind of trouble a flag points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Misuse,
    Io,
    Hardware,
    MultiNode,
}

impl Category {
    /// The name written in `flag` records.
    pub const fn name(self) -> &'static str {
        match self {
            Category::Misuse => "misuse",
            Category::Io => "I/O",
            Category::Hardware => "hardware",
            Category::MultiNode => "multi-node",
        }
    }
}

/// One rule's finding, when its inputs were there.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub raised: bool,
    /// The measured value (rounded to 6 decimals in the flag record).
    pub value: Option<f64>,
    /// The threshold it was compared with.
    pub threshold: Option<f64>,
    /// One line on why.
    pub reason: String,
}

impl Verdict {
    /// `value` compared with `threshold`.
    fn compared(raised: bool, value: f64, threshold: f64, reason: String) -> Verdict {
        Verdict {
            raised,
            value: Some(value),
            threshold: Some(threshold),
            reason,
        }
    }

    /// Evaluated, with nothing to raise (too short, or one node).
    fn quiet() -> Verdict {
        Verdict {
            raised: false,
            value: None,
            threshold: None,
            reason: String::new(),
        }
    }
}

/// A rule's test: `None` when its inputs are absent (the flag is listed in
/// `not_evaluated`), else its verdict.
pub type Test = fn(&Facts, &Thresholds) -> Option<Verdict>;

/// One flag.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// The flag's name, as in `flag` records and `not_evaluated`.
    pub flag: &'static str,
    pub category: Category,
    /// What it needs, as groups of record fields (`kind.field`): without
    /// any field of a group it is not evaluated (listed in
    /// `not_evaluated`). A rule may need more than presence (a positive
    /// elapsed time, enough samples); its test says so by returning `None`.
    pub inputs: &'static [&'static [&'static str]],
    /// Its thresholds, the main one (named after the flag) first.
    pub params: &'static [Param],
    /// One line on what raises it.
    pub doc: &'static str,
    pub test: Test,
}

/// A sample's CPU fraction (see [`Facts::frac`]) needs its `cpu_frac`, or
/// its `cpu_cores` and the allocated CPUs.
const CPU_FRAC: [&[&str]; 2] = [
    &["sample.cpu_frac", "sample.cpu_cores"],
    &[
        "sample.cpu_frac",
        "job.alloc_cpus",
        "summary.req_cpus",
        "meta.req_cpus",
    ],
];

/// Every flag, in output order.
pub const RULES: &[Rule] = &[
    Rule {
        flag: "oom_killed",
        category: Category::Misuse,
        inputs: &[&["job.state"]],
        params: &[],
        doc: "the job was killed for running out of memory",
        test: oom_killed,
    },
    Rule {
        flag: "timed_out",
        category: Category::Misuse,
        inputs: &[&["job.state"]],
        params: &[],
        doc: "the job was killed at its time limit",
        test: timed_out,
    },
    Rule {
        flag: "mem_overrequest",
        category: Category::Misuse,
        inputs: &[
            &["job.max_rss_mb", "summary.peak_rss_mb", "sample.rss_mb"],
            &["job.req_mem_mb", "summary.req_mem_mb", "meta.req_mem_mb"],
        ],
        params: &[Param::MemOverrequest],
        doc: "the peak RSS is a small share of the memory requested",
        test: mem_overrequest,
    },
    Rule {
        flag: "idle_cpu",
        category: Category::Misuse,
        inputs: &CPU_FRAC,
        params: &[Param::IdleCpu, Param::IdleCpuFrac],
        doc: "the CPUs are idle for much of the run",
        test: idle_cpu,
    },
    Rule {
        flag: "single_threaded",
        category: Category::Misuse,
        inputs: &[
            &["job.alloc_cpus", "summary.req_cpus"],
            &["job.total_cpu_s", "summary.cpu_s"],
            &["job.elapsed_s", "summary.duration_s"],
        ],
        params: &[Param::SingleThreaded, Param::SingleThreadedMinCpus],
        doc: "many CPUs, about one of them used",
        test: single_threaded,
    },
    Rule {
        flag: "mem_spike_plateau",
        category: Category::Misuse,
        inputs: &[&["sample.rss_mb"]],
        params: &[Param::MemSpikePlateau, Param::MemSpikePlateauWindow],
        doc: "memory peaks early, then stays well below the peak",
        test: mem_spike_plateau,
    },
    Rule {
        flag: "io_dominant",
        category: Category::Io,
        inputs: &[
            &["sample.read_mbps", "sample.write_mbps"],
            CPU_FRAC[0],
            CPU_FRAC[1],
        ],
        params: &[
            Param::IoDominant,
            Param::IoDominantMbps,
            Param::IoDominantCpuFrac,
        ],
        doc: "heavy disk I/O with idle CPUs for much of the run",
        test: io_dominant,
    },
    Rule {
        flag: "lustre_metadata_heavy",
        category: Category::Io,
        inputs: &[&["summary.lustre_meta_ops", "sample.lustre_meta_ops"]],
        params: &[Param::LustreMetadataHeavy],
        doc: "many Lustre metadata operations per second",
        test: lustre_metadata_heavy,
    },
    Rule {
        flag: "lustre_io_dominant",
        category: Category::Io,
        inputs: &[
            &["sample.lustre_read_mbps", "sample.lustre_write_mbps"],
            CPU_FRAC[0],
            CPU_FRAC[1],
        ],
        params: &[
            Param::LustreIoDominant,
            Param::LustreIoDominantMbps,
            Param::LustreIoDominantCpuFrac,
        ],
        doc: "heavy Lustre I/O with idle CPUs for much of the run",
        test: lustre_io_dominant,
    },
    Rule {
        flag: "high_cpi",
        category: Category::Hardware,
        inputs: &[&["summary.cpi", "sample.cpi"]],
        params: &[Param::HighCpi],
        doc: "many cycles per instruction",
        test: high_cpi,
    },
    Rule {
        flag: "cache_thrashing",
        category: Category::Hardware,
        inputs: &[&["summary.cache_miss_rate", "sample.cache_miss_rate"]],
        params: &[Param::CacheThrashing],
        doc: "most cache references miss",
        test: cache_thrashing,
    },
    Rule {
        flag: "numa_misplaced",
        category: Category::Hardware,
        inputs: &[&["summary.numa_miss_rate", "sample.numa_miss_rate"]],
        params: &[Param::NumaMisplaced],
        doc: "memory is often on the wrong NUMA node",
        test: numa_misplaced,
    },
    Rule {
        flag: "catastrophe",
        category: Category::Hardware,
        inputs: &[&["sample.cpu_cores", "sample.cpu_frac"]],
        params: &[
            Param::Catastrophe,
            Param::CatastropheMinS,
            Param::CatastropheMinShare,
            Param::CatastropheStartShare,
            Param::CatastropheGain,
        ],
        doc: "CPU activity drops for good partway through the run",
        test: catastrophe,
    },
    Rule {
        flag: "node_imbalance",
        category: Category::MultiNode,
        inputs: &[&["summary.node_cpu_cv"]],
        params: &[Param::NodeImbalance],
        doc: "the nodes are unevenly busy",
        test: node_imbalance,
    },
    Rule {
        flag: "idle_nodes",
        category: Category::MultiNode,
        inputs: &[
            &["job.total_cpu_s", "summary.cpu_s"],
            &["job.nnodes", "summary.nodes"],
            &["job.alloc_cpus", "summary.req_cpus"],
            &["job.elapsed_s", "summary.duration_s"],
        ],
        params: &[Param::IdleNodes],
        doc: "several nodes, less CPU time than one node could give",
        test: idle_nodes,
    },
    Rule {
        flag: "gpu_idle",
        category: Category::Misuse,
        inputs: &[&["sample.gpu_util", "job.gpu_util"]],
        params: &[Param::GpuIdle, Param::GpuIdleUtil],
        doc: "the allocated GPUs are idle for most of the run",
        test: gpu_idle,
    },
    Rule {
        flag: "gpu_unused",
        category: Category::Misuse,
        inputs: &[&["summary.gpus", "job.gpu_mem_max_mb"]],
        params: &[Param::GpuUnused],
        doc: "a GPU of the job is never used at all",
        test: gpu_unused,
    },
    Rule {
        flag: "gpu_mem_low",
        category: Category::Misuse,
        inputs: &[&["summary.gpus", "sample.gpu_mem_mb", "job.gpu_mem_max_mb"]],
        params: &[Param::GpuMemLow, Param::GpuMemLowCardMb],
        doc: "peak GPU memory is a small share of the GPU's: a smaller or shared GPU would do",
        test: gpu_mem_low,
    },
];

fn round3(v: f64) -> f64 {
    // A value near f64's limit is shown as it is: scaled, it overflows.
    let x = v * 1e3;
    if x.is_finite() {
        x.round() / 1e3
    } else {
        v
    }
}

fn oom_killed(f: &Facts, _: &Thresholds) -> Option<Verdict> {
    let state = f.job.state.as_deref()?;
    let mut reason =
        String::from("the job was killed for running out of memory (state OUT_OF_MEMORY)");
    if let Some(node) = oom_node(&f.summary) {
        reason.push_str(&node);
    }
    Some(Verdict {
        raised: state.starts_with("OUT_OF_MEMORY"),
        value: None,
        threshold: None,
        reason,
    })
}

/// A job killed at its time limit lost the hours it ran (nothing it had
/// not saved is kept), as one killed for memory does.
fn timed_out(f: &Facts, _: &Thresholds) -> Option<Verdict> {
    let state = f.job.state.as_deref()?;
    Some(Verdict {
        raised: state.starts_with("TIMEOUT"),
        value: None,
        threshold: None,
        reason: "the job was killed at its time limit (state TIMEOUT): what it had not saved is lost; ask for more time (hpc recommend) or checkpoint".into(),
    })
}

/// On several nodes, which one ran out (each has the same limit: --mem is
/// per node), as the reason's tail. The node with the highest kernel
/// high-water mark reached the limit even when a spike fell between two
/// samples; nodes within [`HWM_TIE`] of it (another one near the limit, as
/// page cache can bring it) are told apart by their sampled RSS peaks.
/// Without high-water marks, the highest sampled RSS peak.
fn oom_node(s: &crate::eval::SummaryFacts) -> Option<String> {
    let rss = &s.peak_rss_mb_by_node;
    let rss_of = |n: &str| rss.get(n).copied().unwrap_or(0.0);
    let hwm = &s.hwm_mb_by_node;
    // High-water marks decide only when every node with a peak has one.
    if hwm.len() > 1 && rss.keys().all(|n| hwm.contains_key(n)) {
        let top = hwm.values().copied().fold(f64::MIN, f64::max);
        let (node, h) = hwm
            .iter()
            .filter(|(_, h)| **h >= (1.0 - HWM_TIE) * top)
            .max_by(|a, b| rss_of(a.0).total_cmp(&rss_of(b.0)).then(a.1.total_cmp(b.1)))?;
        let others = hwm
            .iter()
            .filter(|(n, _)| *n != node)
            .map(|(_, h)| *h)
            .fold(f64::MIN, f64::max);
        let peak = rss
            .get(node)
            .map(|p| format!(", peak RSS {p:.0} MiB"))
            .unwrap_or_default();
        let rest = if others > *h {
            format!(
                "another node's high-water mark {others:.0} MiB, within {:.0} % of it, with a lower peak RSS",
                HWM_TIE * 100.0
            )
        } else {
            format!("the other nodes' high-water marks at most {others:.0} MiB")
        };
        return Some(format!(
            ", on node {node} (high-water mark {h:.0} MiB{peak}; {rest})"
        ));
    }
    if rss.len() > 1 {
        let mut by_peak: Vec<(&String, f64)> = rss.iter().map(|(n, p)| (n, *p)).collect();
        by_peak.sort_by(|a, b| b.1.total_cmp(&a.1));
        return Some(format!(
            ", on node {} (peak {:.0} MiB; the other nodes at most {:.0} MiB)",
            by_peak[0].0, by_peak[0].1, by_peak[1].1
        ));
    }
    None
}

/// High-water marks within this share of the highest count as reaching
/// the same limit.
const HWM_TIE: f64 = 0.02;

fn mem_overrequest(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let sample_peak = f
        .series
        .p
        .iter()
        .map(|p| p.rss)
        .filter(|v| !v.is_nan())
        .reduce(f64::max);
    let peak = [f.job.used_mem_mb(), f.summary.peak_rss_mb, sample_peak]
        .into_iter()
        .flatten()
        .reduce(f64::max)?;
    let req = f
        .job
        .req_mem_mb
        .or(f.summary.req_mem_mb)
        .or(f.meta_mem_mb)
        .filter(|r| *r > 0.0)?;
    let th_m = th.get(Param::MemOverrequest);
    let ratio = peak / req;
    let reason = format!(
        "peak RSS {} MiB is {:.1} % of the {} MiB requested",
        round3(peak),
        ratio * 100.0,
        round3(req)
    );
    Some(Verdict::compared(ratio < th_m, ratio, th_m, reason))
}

fn idle_cpu(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let (th_i, th_if) = (th.get(Param::IdleCpu), th.get(Param::IdleCpuFrac));
    let share = f.series.share(|p| f.frac(p).map(|fr| fr < th_if))?;
    let reason = format!(
        "CPU fraction below {th_if} for {:.1} % of the run",
        share * 100.0
    );
    Some(Verdict::compared(share > th_i, share, th_i, reason))
}

fn single_threaded(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let th_s = th.get(Param::SingleThreaded);
    let th_sc = th.get(Param::SingleThreadedMinCpus);
    let (job, sum) = (&f.job, &f.summary);
    let from_job = job.alloc_cpus.zip(job.total_cpu_s).zip(job.elapsed_s);
    let from_sum = sum.req_cpus.zip(sum.cpu_s).zip(sum.duration_s);
    let ((cpus, cpu), elapsed) = from_job.or(from_sum).filter(|(_, el)| *el > 0.0)?;
    let eff = cpu / elapsed;
    let reason = format!(
        "{} effective cores (CPU time / elapsed) on {cpus} CPUs",
        round3(eff)
    );
    Some(Verdict::compared(
        cpus > th_sc && eff < th_s,
        eff,
        th_s,
        reason,
    ))
}

fn mem_spike_plateau(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let th_p = th.get(Param::MemSpikePlateau);
    let th_pw = th.get(Param::MemSpikePlateauWindow);
    let s = &f.series;
    let rss: Vec<(f64, f64)> =
        s.p.iter()
            .filter(|p| !p.rss.is_nan())
            .map(|p| (p.t, p.rss))
            .collect();
    if rss.len() < 3 {
        return None;
    }
    let t0 = rss[0].0;
    let t_end = s.p.last().map(|p| p.t).unwrap_or(t0) + s.dt.last().copied().unwrap_or(0.0);
    let (tp, peak) = rss.iter().fold(
        (t0, f64::NEG_INFINITY),
        |a, &(t, v)| if v > a.1 { (t, v) } else { a },
    );
    let cut = t0 + th_pw * (t_end - t0);
    let later = rss
        .iter()
        .filter(|(t, _)| *t > cut)
        .map(|(_, v)| *v)
        .reduce(f64::max)
        .filter(|_| peak > 0.0)?;
    let ratio = later / peak;
    let reason = format!(
        "RSS peaks at {} MiB {:.0} s into the run, then stays at or below {:.1} % of it",
        round3(peak),
        tp - t0,
        ratio * 100.0
    );
    Some(Verdict::compared(
        tp <= cut && ratio < th_p,
        ratio,
        th_p,
        reason,
    ))
}

/// The share of the run with I/O (`io`) above a rate while the CPU
/// fraction is below a level, against `params`: [share, rate, level].
fn io_bound(
    f: &Facts,
    th: &Thresholds,
    params: [Param; 3],
    io: fn(&Point) -> f64,
    what: &str,
) -> Option<Verdict> {
    let [th_d, th_mb, th_cf] = params.map(|p| th.get(p));
    let share = f.series.share(|p| {
        let io = some(io(p))?;
        let fr = f.frac(p)?;
        Some(io > th_mb && fr < th_cf)
    })?;
    let reason = format!(
        "{what} I/O above {th_mb} MB/s with CPU fraction below {th_cf} for {:.1} % of the run",
        share * 100.0
    );
    Some(Verdict::compared(share > th_d, share, th_d, reason))
}

fn io_dominant(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let params = [
        Param::IoDominant,
        Param::IoDominantMbps,
        Param::IoDominantCpuFrac,
    ];
    io_bound(f, th, params, |p| p.io, "disk")
}

fn lustre_io_dominant(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let params = [
        Param::LustreIoDominant,
        Param::LustreIoDominantMbps,
        Param::LustreIoDominantCpuFrac,
    ];
    io_bound(f, th, params, |p| p.lustre_io, "Lustre")
}

/// A "mean above threshold" rule: the summary's mean, else the series'.
fn mean_above(
    f: &Facts,
    th: &Thresholds,
    param: Param,
    summary: Option<f64>,
    get: fn(&Point) -> f64,
    what: &str,
) -> Option<Verdict> {
    let v = summary.or_else(|| f.series.mean(get))?;
    let th = th.get(param);
    let reason = format!("mean {what} {} > {th}", round3(v));
    Some(Verdict::compared(v > th, v, th, reason))
}

fn lustre_metadata_heavy(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let p = Param::LustreMetadataHeavy;
    let what = "Lustre metadata ops/s";
    mean_above(f, th, p, f.summary.lustre_meta_ops, |p| p.lustre_meta, what)
}

fn high_cpi(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let what = "cycles per instruction";
    mean_above(f, th, Param::HighCpi, f.summary.cpi, |p| p.cpi, what)
}

fn cache_thrashing(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let p = Param::CacheThrashing;
    let what = "cache misses per reference";
    mean_above(f, th, p, f.summary.cache_miss_rate, |p| p.cache, what)
}

fn numa_misplaced(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let p = Param::NumaMisplaced;
    mean_above(
        f,
        th,
        p,
        f.summary.numa_miss_rate,
        |p| p.numa,
        "NUMA miss rate",
    )
}

fn catastrophe(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let th_c = th.get(Param::Catastrophe);
    let s = &f.series;
    // Busy cores when any sample has them, else the CPU fraction.
    let use_cores = s.p.iter().any(|p| !p.cores.is_nan());
    let (mut t, mut x, mut w) = (Vec::new(), Vec::new(), Vec::new());
    for (p, d) in s.p.iter().zip(&s.dt) {
        if let Some(v) = some(if use_cores { p.cores } else { p.frac }) {
            t.push(p.t);
            x.push(v);
            w.push(*d);
        }
    }
    if x.len() < 4 {
        return None;
    }
    let run: f64 = w.iter().sum();
    let min_dur = th
        .get(Param::CatastropheMinS)
        .max(th.get(Param::CatastropheMinShare) * run);
    let start_share = th.get(Param::CatastropheStartShare);
    // Too short for the test: evaluated, nothing to raise.
    let Some((ratio, gain, tail, split)) = change_point(&t, &x, &w, start_share, min_dur) else {
        return Some(Verdict::quiet());
    };
    let reason = format!(
        "CPU activity drops to {:.1} % of its earlier level {:.0} s into the run ({:.0} % of it) and does not recover",
        ratio * 100.0,
        split - t[0],
        (split - t[0]) / run * 100.0
    );
    let raised = ratio < th_c && tail < th_c && gain > th.get(Param::CatastropheGain);
    Some(Verdict::compared(raised, ratio, th_c, reason))
}

fn node_imbalance(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let th_n = th.get(Param::NodeImbalance);
    let cv = f.summary.node_cpu_cv?;
    let reason = format!(
        "per-node mean busy cores vary with a coefficient of variation of {}",
        round3(cv)
    );
    Some(Verdict::compared(cv > th_n, cv, th_n, reason))
}

fn idle_nodes(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    let th_in = th.get(Param::IdleNodes);
    let (job, sum) = (&f.job, &f.summary);
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
    let (((cpu, nodes), cpus), elapsed) = from_job.or(from_sum).filter(|(_, el)| *el > 0.0)?;
    if nodes <= 1.0 {
        return Some(Verdict::quiet());
    }
    let share = cpu / (cpus / nodes * elapsed);
    let reason = format!(
        "{} CPU seconds on {nodes} nodes is {:.1} % of one node's capacity over the run",
        round3(cpu),
        share * 100.0
    );
    Some(Verdict::compared(share < th_in, share, th_in, reason))
}

/// The GPUs idle (mean utilisation below `gpu_idle_util`) for more than
/// `gpu_idle` of the sampled time; from sacct alone, the job's mean
/// utilisation below `gpu_idle_util`.
fn gpu_idle(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    if !f.has_gpus() {
        return Some(Verdict::quiet());
    }
    let (th_i, th_u) = (th.get(Param::GpuIdle), th.get(Param::GpuIdleUtil));
    if let Some(share) = f.series.share(|p| some(p.gpu_util).map(|u| u < th_u)) {
        let reason = format!(
            "GPU utilisation below {th_u} % for {:.1} % of the run",
            share * 100.0
        );
        return Some(Verdict::compared(share > th_i, share, th_i, reason));
    }
    let u = f.job.gpu_util?;
    let gpus = f.job.alloc_gpus.unwrap_or(0.0);
    let reason = format!(
        "the {gpus} allocated GPUs were {} % used on average (sacct)",
        round3(u)
    );
    Some(Verdict::compared(u < th_u, u, th_u, reason))
}

/// A GPU whose peak utilisation stays below `gpu_unused` with no process
/// of the job on it; from sacct alone, every GPU unused: no GPU memory
/// ever used and a mean utilisation below `gpu_unused`.
fn gpu_unused(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    if !f.has_gpus() {
        return Some(Verdict::quiet());
    }
    let th_u = th.get(Param::GpuUnused);
    let gpus = &f.summary.gpus;
    if !gpus.is_empty() {
        let unused: Vec<_> = gpus
            .iter()
            .filter(|g| g.peak_util.is_some_and(|u| u < th_u) && g.max_procs.unwrap_or(0) == 0)
            .collect();
        let low = gpus.iter().filter_map(|g| g.peak_util).reduce(f64::min)?;
        let names: Vec<String> = unused.iter().map(|g| g.label()).collect();
        let reason = format!(
            "{} of {} GPUs never used (peak utilisation below {th_u} %, no process of the job): {}",
            unused.len(),
            gpus.len(),
            names.join(", ")
        );
        return Some(Verdict::compared(!unused.is_empty(), low, th_u, reason));
    }
    let mem = f.job.gpu_mem_max_mb?;
    let gpus = f.job.alloc_gpus.filter(|g| *g > 0.0)?;
    let u = f.job.gpu_util.unwrap_or(0.0);
    let reason = format!(
        "none of the {gpus} allocated GPUs was used: no GPU memory, {} % utilisation (sacct)",
        round3(u)
    );
    Some(Verdict::compared(mem <= 0.0 && u < th_u, u, th_u, reason))
}

/// The largest share of its GPU's memory that any GPU of the job reached
/// below `gpu_mem_low`: from the summary's GPUs, else the samples (memory
/// summed over the GPUs), else sacct's peak over `gpu_mem_low_card_mb`.
fn gpu_mem_low(f: &Facts, th: &Thresholds) -> Option<Verdict> {
    if !f.has_gpus() {
        return Some(Verdict::quiet());
    }
    let th_m = th.get(Param::GpuMemLow);
    let per_gpu = f
        .summary
        .gpus
        .iter()
        .filter_map(|g| Some((g.peak_mem_mb?, g.mem_total_mb.filter(|t| *t > 0.0)?)))
        .reduce(|a, b| if a.0 / a.1 >= b.0 / b.1 { a } else { b });
    let series = || {
        f.series
            .p
            .iter()
            .filter(|p| p.gpu_mem_total > 0.0 && !p.gpu_mem.is_nan())
            .map(|p| (p.gpu_mem, p.gpu_mem_total))
            .reduce(|a, b| if a.0 / a.1 >= b.0 / b.1 { a } else { b })
    };
    let card = th.get(Param::GpuMemLowCardMb);
    let sacct = || f.job.gpu_mem_max_mb.zip(Some(card).filter(|c| *c > 0.0));
    let (peak, total) = per_gpu.or_else(series).or_else(sacct)?;
    let ratio = peak / total;
    let reason = format!(
        "peak GPU memory {} MiB is {:.1} % of the GPU's {} MiB",
        round3(peak),
        ratio * 100.0,
        round3(total)
    );
    Some(Verdict::compared(ratio < th_m, ratio, th_m, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_threshold_belongs_to_one_rule_in_table_order() {
        let listed: Vec<Param> = RULES
            .iter()
            .flat_map(|r| r.params.iter().copied())
            .collect();
        assert_eq!(
            listed,
            Param::ALL,
            "the rules' params, in order, are Param::ALL"
        );
        for r in RULES {
            if let Some(main) = r.params.first() {
                assert_eq!(
                    main.name(),
                    r.flag,
                    "the main threshold is named after the flag"
                );
            }
            for p in r.params {
                assert!(
                    p.name().starts_with(r.flag),
                    "{} is not {}_*",
                    p.name(),
                    r.flag
                );
            }
        }
    }

    #[test]
    fn flag_names_are_unique_and_inputs_are_kind_dot_field() {
        for (i, r) in RULES.iter().enumerate() {
            assert!(
                RULES[..i].iter().all(|o| o.flag != r.flag),
                "{} twice",
                r.flag
            );
            assert!(!r.inputs.is_empty(), "{} reads nothing", r.flag);
            for input in r.inputs.iter().flat_map(|g| g.iter()) {
                let (kind, field) = input.split_once('.').unwrap_or(("", ""));
                assert!(
                    ["job", "summary", "sample", "meta"].contains(&kind) && !field.is_empty(),
                    "{}: {input}",
                    r.flag
                );
            }
        }
    }
}
