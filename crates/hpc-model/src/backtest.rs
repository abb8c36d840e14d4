//! `hpc-model backtest`: replays a history in time order, sizing each job
//! from the earlier jobs of its group only, and measures every policy side
//! by side: ours at several risks (and the model tier when the trace has an
//! input size), the user's request, the group's median, its 95th
//! percentile x 1.2 and the largest peak so far.

use std::collections::HashMap;
use std::io::Write;

use argh::FromArgs;
use hpc_core::advice::Backtest;
use hpc_core::input::Input;
use hpc_core::ndjson::Rejects;
use hpc_core::record::write_tagged;
use hpc_core::{Error, Result};

use crate::fit::MIN_FIT;
use crate::model;
use crate::recommend::{round_mem, MIN_HISTORY, PRIOR_DF};
use crate::risk::{self, Prior, Scale};
use crate::trace::{self, Heuristics, Mapping, Trace, TraceJob};

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "backtest")]
/// Replay a history in time order and measure each sizing policy.
pub struct BacktestArgs {
    /// job records to replay (what hpc-store dump prints; a file or -)
    #[argh(positional)]
    history: Option<String>,
    /// a CSV trace to replay instead of job records
    #[argh(option)]
    csv: Option<String>,
    /// the MGnify preset: this heuristics TSV is the request (with --csv)
    #[argh(option)]
    mgnify: Option<String>,
    /// the CSV column(s) that form a group, comma-separated
    #[argh(option)]
    group: Option<String>,
    /// the CSV column of peak memory used
    #[argh(option)]
    used: Option<String>,
    /// the CSV column of memory requested
    #[argh(option)]
    request: Option<String>,
    /// the CSV column of runtime
    #[argh(option)]
    runtime: Option<String>,
    /// the CSV column that orders jobs in time
    #[argh(option)]
    order: Option<String>,
    /// the CSV column of input size (the model tier takes part)
    #[argh(option)]
    input: Option<String>,
    /// unit of the used and request columns: b, kb, mb (default) or gb
    #[argh(option, default = "String::from(\"mb\")")]
    mem_unit: String,
    /// unit of the runtime column: s (default) or ms
    #[argh(option, default = "String::from(\"s\")")]
    runtime_unit: String,
    /// risks of our policy, percent, comma-separated (default 0.5,1,2,5,10)
    #[argh(option, default = "String::from(\"0.5,1,2,5,10\")")]
    risks: String,
    /// time-to-failure fraction of a failed attempt (default 1.0)
    #[argh(option, default = "1.0")]
    ttf: f64,
    /// score only jobs whose group has at least this many earlier jobs
    #[argh(option, default = "0")]
    min_earlier: usize,
    /// memory of a cold start without a request, MiB (default 4096)
    #[argh(option, default = "4096.0")]
    cold_mb: f64,
    /// output: text (default) or ndjson
    #[argh(option, default = "String::from(\"text\")")]
    format: String,
}

/// What a replay is asked to do.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Risks of our policy, as fractions.
    pub risks: Vec<f64>,
    /// Time-to-failure fraction of a failed attempt.
    pub ttf: f64,
    /// Jobs whose group has fewer earlier jobs are replayed but not scored.
    pub min_earlier: usize,
    /// A cold start's memory when the job has no request, MiB.
    pub cold_mb: f64,
    /// The weight (degrees of freedom) of the pooled spread in small groups.
    pub prior_df: f64,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            risks: vec![0.005, 0.01, 0.02, 0.05, 0.1],
            ttf: 1.0,
            min_earlier: 0,
            cold_mb: 4096.0,
            prior_df: PRIOR_DF,
        }
    }
}

/// Parses a comma-separated list of percentages into fractions in (0, 1).
pub fn parse_risks(text: &str) -> Result<Vec<f64>> {
    text.split(',')
        .map(|s| {
            let s = s.trim().trim_end_matches('%');
            match s.parse::<f64>() {
                Ok(p) if p > 0.0 && p < 100.0 => Ok(p / 100.0),
                _ => Err(Error::Usage(format!(
                    "risk '{s}': a percentage in (0, 100)"
                ))),
            }
        })
        .collect()
}

/// The replay refits the model tier on at most this many latest jobs.
pub const FIT_WINDOW: usize = 500;

/// The earlier jobs of one group.
#[derive(Debug, Default)]
struct Group {
    /// Peaks, sorted ascending.
    sorted: Vec<f64>,
    /// Memory-times (peak x runtime), sorted ascending.
    costs: Vec<f64>,
    /// Inputs and peaks of the jobs with an input size, in order.
    xs: Vec<Vec<f64>>,
    ys: Vec<f64>,
    /// Running mean and sum of squares of the logs of the peaks (Welford).
    log_mean: f64,
    log_m2: f64,
}

/// The pooled within-group spread of the logs of all earlier peaks.
#[derive(Debug, Default)]
struct Pool {
    m2: f64,
    df: f64,
}

impl Pool {
    fn prior(&self, weight: f64) -> Option<Prior> {
        (self.df > 0.0 && weight > 0.0).then(|| Prior {
            var: self.m2 / self.df,
            df: weight,
        })
    }
}

impl Group {
    /// Adds a job; returns the change in its sum of squares of logs.
    fn add(&mut self, job: &TraceJob) -> f64 {
        let n = self.sorted.len() as f64 + 1.0;
        let v = job.used_mb.ln();
        let delta = v - self.log_mean;
        self.log_mean += delta / n;
        let before = self.log_m2;
        self.log_m2 += delta * (v - self.log_mean);
        insert_sorted(&mut self.sorted, job.used_mb);
        insert_sorted(&mut self.costs, job.used_mb * job.runtime_s);
        if let Some(x) = job.input {
            self.xs.push(vec![x]);
            self.ys.push(job.used_mb);
        }
        self.log_m2 - before
    }
}

/// Inserts `v` into the ascending `sorted`.
fn insert_sorted(sorted: &mut Vec<f64>, v: f64) {
    let at = sorted.partition_point(|x| *x < v);
    sorted.insert(at, v);
}

/// How a policy sizes a job from its group's earlier jobs; `None` means a
/// cold start (the request, else `--cold-mb`).
type Rule = fn(&Group, &TraceJob, f64, Option<Prior>) -> Option<f64>;

/// Ours: the history tier's bound at risk r (see [`risk::bound_sorted`]);
/// the replay lowers r for a cheap group (see [`risk::cost_scaled_risk`]).
fn ours(g: &Group, _: &TraceJob, r: f64, prior: Option<Prior>) -> Option<f64> {
    if g.sorted.len() < MIN_HISTORY {
        return None;
    }
    risk::bound_sorted(&g.sorted, &[], r, Scale::Log, prior).map(|b| round_mem(b.value))
}

/// The model tier: the regression on input size refitted on the earlier
/// jobs, plus the residual bound at risk r; ours where it cannot fit.
fn modelled(g: &Group, job: &TraceJob, r: f64, prior: Option<Prior>) -> Option<f64> {
    let (Some(x), true) = (job.input, g.ys.len() >= MIN_FIT) else {
        return ours(g, job, r, prior);
    };
    let from = g.ys.len().saturating_sub(FIT_WINDOW);
    let (xs, ys) = (&g.xs[from..], &g.ys[from..]);
    let Some(m) = model::fit(xs, ys) else {
        return ours(g, job, r, prior);
    };
    let err = model::residual_bound(&m, xs, ys, r)?;
    Some(round_mem(m.predict(&[x]) + err))
}

fn request(_: &Group, _: &TraceJob, _: f64, _: Option<Prior>) -> Option<f64> {
    None
}

fn median(g: &Group, _: &TraceJob, _: f64, _: Option<Prior>) -> Option<f64> {
    (!g.sorted.is_empty()).then(|| risk::sample_quantile(&g.sorted, 0.5))
}

fn p95x12(g: &Group, _: &TraceJob, _: f64, _: Option<Prior>) -> Option<f64> {
    (!g.sorted.is_empty()).then(|| 1.2 * risk::sample_quantile(&g.sorted, 0.95))
}

fn max(g: &Group, _: &TraceJob, _: f64, _: Option<Prior>) -> Option<f64> {
    g.sorted.last().copied()
}

/// The baselines: name and rule.
const BASELINES: &[(&str, Rule)] = &[
    ("request", request),
    ("median", median),
    ("p95x1.2", p95x12),
    ("max", max),
];

/// The running sums of one policy.
#[derive(Debug, Default, Clone)]
struct Tally {
    jobs: u64,
    cold: u64,
    under: u64,
    retries: u64,
    rec_mbs: f64,
    req_mbs: f64,
    over_mbs: f64,
    under_mbs: f64,
    used_mbs: f64,
}

impl Tally {
    /// Scores one job given `alloc` on the first attempt: a failed attempt
    /// costs alloc x runtime x ttf and the next one doubles the memory.
    fn add(&mut self, alloc: f64, job: &TraceJob, cold: bool, ttf: f64) {
        let t = job.runtime_s;
        self.jobs += 1;
        self.cold += u64::from(cold);
        if let Some(q) = job.request_mb {
            self.rec_mbs += alloc * t;
            self.req_mbs += q * t;
        }
        self.under += u64::from(alloc < job.used_mb);
        let mut a = alloc.max(1.0);
        while a < job.used_mb {
            self.under_mbs += a * t * ttf;
            self.retries += 1;
            a *= 2.0;
        }
        self.over_mbs += (a - job.used_mb) * t;
        self.used_mbs += job.used_mb * t;
    }

    fn record(&self, policy: &str, risk: Option<f64>) -> Backtest {
        let gbh = 1.0 / (1024.0 * 3600.0);
        let jobs = self.jobs.max(1) as f64;
        let used = self.used_mbs;
        let r6 = hpc_core::num::round6;
        Backtest {
            policy: policy.into(),
            risk,
            jobs: self.jobs,
            cold: self.cold,
            under_share: r6(self.under as f64 / jobs),
            memtime_ratio: r6(self.rec_mbs / self.req_mbs),
            over_gbh: r6(self.over_mbs * gbh),
            under_gbh: r6(self.under_mbs * gbh),
            wastage_gbh: r6((self.over_mbs + self.under_mbs) * gbh),
            maq: r6(used / (used + self.over_mbs + self.under_mbs)),
            retries_per_job: r6(self.retries as f64 / jobs),
        }
    }
}

/// One policy of the replay.
struct Policy {
    name: &'static str,
    risk: Option<f64>,
    rule: Rule,
    tally: Tally,
}

fn policies(opts: &Opts, with_model: bool) -> Vec<Policy> {
    let at = |name, rule: Rule| {
        opts.risks.iter().map(move |&r| Policy {
            name,
            risk: Some(r),
            rule,
            tally: Tally::default(),
        })
    };
    let mut all: Vec<Policy> = at("ours", ours).collect();
    if with_model {
        all.extend(at("model", modelled));
    }
    all.extend(BASELINES.iter().map(|&(name, rule)| Policy {
        name,
        risk: None,
        rule,
        tally: Tally::default(),
    }));
    all
}

/// Replays `jobs` (in order) and returns one record per policy and risk.
pub fn replay(jobs: &[TraceJob], opts: &Opts) -> Vec<Backtest> {
    let with_model = jobs.iter().any(|j| j.input.is_some());
    let mut all = policies(opts, with_model);
    let mut groups: HashMap<&str, Group> = HashMap::new();
    let mut pool = Pool::default();
    let mut costs: Vec<f64> = Vec::with_capacity(jobs.len());
    for job in jobs {
        let g = groups.entry(job.group.as_str()).or_default();
        let earlier = g.sorted.len();
        if earlier >= opts.min_earlier {
            let fallback = job.request_mb.unwrap_or(opts.cold_mb);
            let prior = pool.prior(opts.prior_df);
            let own = risk::median_sorted(&g.costs, MIN_HISTORY);
            let typical = risk::median_sorted(&costs, 1);
            for p in &mut all {
                let r = risk::cost_scaled_risk(p.risk.unwrap_or(0.0), own, typical);
                let alloc = (p.rule)(g, job, r, prior).unwrap_or(fallback);
                p.tally.add(alloc, job, earlier == 0, opts.ttf);
            }
        }
        insert_sorted(&mut costs, job.used_mb * job.runtime_s);
        let had = g.sorted.len();
        pool.m2 += g.add(job);
        pool.df += if had > 0 { 1.0 } else { 0.0 };
    }
    all.iter().map(|p| p.tally.record(p.name, p.risk)).collect()
}

/// Writes the records as a table and the calibration of our policy.
pub fn write_text(out: &mut impl Write, recs: &[Backtest]) -> Result<()> {
    writeln!(
        out,
        "{:<8} {:>5} {:>6} {:>5} {:>7} {:>7} {:>10} {:>10} {:>10} {:>6} {:>7}",
        "policy",
        "risk%",
        "jobs",
        "cold",
        "under%",
        "memtime",
        "over_gbh",
        "under_gbh",
        "waste_gbh",
        "maq",
        "retries"
    )?;
    for b in recs {
        let risk = b.risk.map_or("-".into(), |r| format!("{}", r * 100.0));
        let ratio = if b.memtime_ratio.is_finite() {
            format!("{:.3}", b.memtime_ratio)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "{:<8} {:>5} {:>6} {:>5} {:>7.2} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>6.3} {:>7.3}",
            b.policy,
            risk,
            b.jobs,
            b.cold,
            b.under_share * 100.0,
            ratio,
            b.over_gbh,
            b.under_gbh,
            b.wastage_gbh,
            b.maq,
            b.retries_per_job
        )?;
    }
    writeln!(
        out,
        "\ncalibration: stated risk vs observed first-attempt under-share"
    )?;
    for b in recs.iter().filter(|b| b.risk.is_some()) {
        writeln!(
            out,
            "{:<8} {:>5.1}% -> {:>5.2}%",
            b.policy,
            b.risk.unwrap_or(0.0) * 100.0,
            b.under_share * 100.0
        )?;
    }
    Ok(())
}

impl BacktestArgs {
    fn mapping(&self) -> Result<Mapping> {
        let usage = |what: &str| Error::Usage(format!("--csv needs --{what}"));
        let mut map = match &self.mgnify {
            Some(tsv) => {
                let text = std::fs::read_to_string(tsv).map_err(|e| {
                    Error::Other(format!(
                        "cannot read {}: {e}",
                        hpc_core::paths::escaped(tsv)
                    ))
                })?;
                Mapping::mgnify(Heuristics::read(&text)?)
            }
            None => Mapping {
                group: self
                    .group
                    .as_deref()
                    .ok_or_else(|| usage("group"))?
                    .split(',')
                    .map(str::to_owned)
                    .collect(),
                used: self.used.clone().ok_or_else(|| usage("used"))?,
                runtime: self.runtime.clone().ok_or_else(|| usage("runtime"))?,
                order: self.order.clone().ok_or_else(|| usage("order"))?,
                request: self.request.clone(),
                mem_scale: trace::mem_scale(&self.mem_unit).ok_or_else(|| {
                    Error::Usage(format!("--mem-unit {}: b, kb, mb or gb", self.mem_unit))
                })?,
                time_scale: trace::time_scale(&self.runtime_unit).ok_or_else(|| {
                    Error::Usage(format!("--runtime-unit {}: s or ms", self.runtime_unit))
                })?,
                ..Default::default()
            },
        };
        map.input = self.input.clone().or(map.input);
        Ok(map)
    }
}

/// Reads the trace the arguments name.
fn read_trace(args: &BacktestArgs, rejects: &mut Rejects) -> Result<Trace> {
    match &args.csv {
        Some(path) => {
            let map = args.mapping()?;
            trace::read_csv(Input::named(path)?.into_reader(), &map, path, rejects)
        }
        None if args.mgnify.is_some() => Err(Error::Usage("--mgnify needs --csv FILE".into())),
        None => {
            let path = args.history.as_deref().unwrap_or("-");
            let h = crate::history::read_history(Input::named(path)?, rejects)?;
            Ok(trace::from_history(&h.jobs))
        }
    }
}

/// Runs `hpc-model backtest`.
pub fn main_with(args: BacktestArgs) -> Result<()> {
    if !matches!(args.format.as_str(), "text" | "ndjson") {
        return Err(Error::Usage(format!(
            "--format {}: text or ndjson",
            args.format
        )));
    }
    if !(args.ttf >= 0.0 && args.ttf <= 1.0) {
        return Err(Error::Usage("--ttf: a fraction in [0, 1]".into()));
    }
    let opts = Opts {
        risks: parse_risks(&args.risks)?,
        ttf: args.ttf,
        min_earlier: args.min_earlier,
        cold_mb: args.cold_mb,
        prior_df: PRIOR_DF,
    };
    let mut rejects = Rejects::new("hpc-model");
    let trace = read_trace(&args, &mut rejects)?;
    if trace.skipped > 0 {
        hpc_core::note!(
            "hpc-model: {} of {} rows have no positive peak or runtime (or did not complete): not replayed",
            trace.skipped,
            trace.rows
        );
    }
    let recs = replay(&trace.jobs, &opts);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.format == "ndjson" {
        for r in &recs {
            write_tagged(&mut out, "backtest", r)?;
        }
    } else {
        write_text(&mut out, &recs)?;
    }
    out.flush()?;
    rejects.finish(trace.rows)
}
