//! `hpc-model backtest`: replays a history in time order, sizing each job
//! from the earlier jobs only, and measures every policy side by side: ours
//! (the calibrated sizer `recommend` runs, at several risks, rounded as
//! `recommend` rounds), the user's request, the group's median, its 95th
//! percentile x 1.2 and the largest peak so far. Memory or time.

use std::collections::HashMap;
use std::io::Write;

use argh::FromArgs;
use hpc_core::advice::Backtest;
use hpc_core::input::Input;
use hpc_core::ndjson::Rejects;
use hpc_core::record::write_tagged;
use hpc_core::table::{Column, Form, Table};
use hpc_core::{Error, Result};

use crate::calib::{Calibrated, Rounding, Seen};
use crate::recommend;
use crate::risk;
use crate::trace::{self, Heuristics, Mapping, Resource, Trace, TraceJob};

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
    /// a Nextflow trace (-with-trace) to replay instead of job records
    #[argh(option)]
    nextflow: Option<String>,
    /// the MGnify preset: this heuristics TSV is the request (with --csv)
    #[argh(option)]
    mgnify: Option<String>,
    /// what to size: mem (default) or time
    #[argh(option, default = "String::from(\"mem\")")]
    resource: String,
    /// the CSV column(s) that form a group, comma-separated
    #[argh(option)]
    group: Option<String>,
    /// the CSV column of what was used (peak memory; runtime for time)
    #[argh(option)]
    used: Option<String>,
    /// the CSV column of what was requested (memory; time limit for time)
    #[argh(option)]
    request: Option<String>,
    /// the CSV column of runtime, each memory job's weight (default 1 each)
    #[argh(option)]
    runtime: Option<String>,
    /// the CSV column that orders jobs in time
    #[argh(option)]
    order: Option<String>,
    /// the CSV column of input size (the model predictor takes part)
    #[argh(option)]
    input: Option<String>,
    /// unit of the used and request columns: b, kb, mb (default) or gb
    #[argh(option, default = "String::from(\"mb\")")]
    mem_unit: String,
    /// unit of the runtime and time columns: s (default) or ms
    #[argh(option, default = "String::from(\"s\")")]
    runtime_unit: String,
    /// risks of our policy, percent, comma-separated (default 1,2,3,5,10)
    #[argh(option, default = "String::from(\"1,2,3,5,10\")")]
    risks: String,
    /// time-to-failure fraction of a failed attempt (default 1.0)
    #[argh(option, default = "1.0")]
    ttf: f64,
    /// score only jobs whose group has at least this many earlier jobs
    #[argh(option, default = "0")]
    min_earlier: usize,
    /// a cold start without a request: MiB for mem (default 4096), s for
    /// time (default 3600)
    #[argh(option)]
    cold: Option<f64>,
    /// the least memory advised, MiB (default 16, as recommend)
    #[argh(option, default = "recommend::MEM_ROUNDING.floor")]
    mem_floor: f64,
    /// memory is advised in whole steps of this many MiB (default 16)
    #[argh(option, default = "recommend::MEM_ROUNDING.step")]
    mem_step: f64,
    /// output: text (default) or ndjson
    #[argh(option, default = "String::from(\"text\")")]
    format: String,
}

/// What a replay is asked to do.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Risks of our policy, as fractions.
    pub risks: Vec<f64>,
    /// What is sized.
    pub resource: Resource,
    /// Time-to-failure fraction of a failed attempt.
    pub ttf: f64,
    /// Jobs whose group has fewer earlier jobs are replayed but not scored.
    pub min_earlier: usize,
    /// A cold start's value when the job has no request (MiB or s).
    pub cold: f64,
    /// How our advice is rounded: exactly as `recommend` rounds it.
    pub rounding: Rounding,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            risks: vec![0.01, 0.02, 0.03, 0.05, 0.1],
            resource: Resource::Mem,
            ttf: 1.0,
            min_earlier: 0,
            cold: 4096.0,
            rounding: recommend::MEM_ROUNDING,
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

/// Inserts `v` into the ascending `sorted`.
fn insert_sorted(sorted: &mut Vec<f64>, v: f64) {
    let at = sorted.partition_point(|x| *x < v);
    sorted.insert(at, v);
}

/// A baseline: the value it gives a job from the group's earlier values
/// (sorted ascending, at least one).
type Rule = fn(&[f64]) -> Option<f64>;

/// The baselines: name and rule. `request` always runs at the request.
const BASELINES: &[(&str, Rule)] = &[
    ("request", |_| None),
    ("median", |s| Some(risk::sample_quantile(s, 0.5))),
    ("p95x1.2", |s| Some(1.2 * risk::sample_quantile(s, 0.95))),
    ("max", |s| s.last().copied()),
];

/// The running sums of one policy.
#[derive(Debug, Default, Clone)]
struct Tally {
    jobs: u64,
    cold: u64,
    under: u64,
    warm_under: u64,
    retries: u64,
    rec: f64,
    req: f64,
    over: f64,
    under_cost: f64,
    used: f64,
}

impl Tally {
    /// Scores one job given `alloc` on the first attempt: a failed attempt
    /// costs alloc x weight x ttf and the next one doubles.
    fn add(&mut self, alloc: f64, job: &TraceJob, cold: bool, ttf: f64) {
        let w = job.weight;
        self.jobs += 1;
        self.cold += u64::from(cold);
        if let Some(q) = job.request {
            self.rec += alloc * w;
            self.req += q * w;
        }
        let under = alloc < job.used;
        self.under += u64::from(under);
        self.warm_under += u64::from(under && !cold);
        let mut a = alloc.max(1.0);
        while a < job.used {
            self.under_cost += a * w * ttf;
            self.retries += 1;
            a *= 2.0;
        }
        self.over += (a - job.used) * w;
        self.used += job.used * w;
    }

    fn record(&self, policy: &str, risk: Option<f64>, resource: Resource) -> Backtest {
        // MiB x s to GB-hours, or s to hours.
        let per = match resource {
            Resource::Mem => 1.0 / (1024.0 * 3600.0),
            Resource::Time => 1.0 / 3600.0,
        };
        let jobs = self.jobs.max(1) as f64;
        let warm = (self.jobs - self.cold).max(1) as f64;
        let r6 = hpc_core::num::round6;
        Backtest {
            policy: policy.into(),
            risk,
            resource: resource.name().into(),
            jobs: self.jobs,
            cold: self.cold,
            under_share: r6(self.under as f64 / jobs),
            warm_under_share: r6(self.warm_under as f64 / warm),
            level: None,
            memtime_ratio: (self.req > 0.0).then(|| r6(self.rec / self.req)),
            over_gbh: r6(self.over * per),
            under_gbh: r6(self.under_cost * per),
            wastage_gbh: r6((self.over + self.under_cost) * per),
            maq: r6(self.used / (self.used + self.over + self.under_cost)),
            retries_per_job: r6(self.retries as f64 / jobs),
        }
    }
}

/// Replays `jobs` (in order) and returns one record per policy and risk:
/// ours (the calibrated sizer of [`crate::calib`], at each risk, rounded as
/// `recommend` rounds) and the baselines.
pub fn replay(jobs: &[TraceJob], opts: &Opts) -> Vec<Backtest> {
    let mut cal = Calibrated::new(&opts.risks, opts.rounding);
    let mut ours = vec![Tally::default(); opts.risks.len()];
    let mut base = vec![Tally::default(); BASELINES.len()];
    let mut groups: HashMap<&str, Vec<f64>> = HashMap::new();
    for job in jobs {
        let g = groups.entry(job.group.as_str()).or_default();
        let advice = cal.advise(&job.group, job.input, job.request).map(|a| a.1);
        if g.len() >= opts.min_earlier {
            let fallback = job.request.unwrap_or(opts.cold);
            for (i, t) in ours.iter_mut().enumerate() {
                let alloc = advice.as_ref().map_or(fallback, |a| a[i]);
                t.add(alloc, job, advice.is_none(), opts.ttf);
            }
            // The baselines' values are rounded as ours are (the
            // request is what the job asked for, as it is).
            for ((_, rule), t) in BASELINES.iter().zip(&mut base) {
                let alloc = (!g.is_empty()).then(|| rule(g)).flatten();
                let alloc = alloc.map(|v| opts.rounding.apply(v));
                t.add(alloc.unwrap_or(fallback), job, g.is_empty(), opts.ttf);
            }
        }
        let seen = Seen {
            group: &job.group,
            input: job.input,
            value: job.used,
            censored: false,
            weight: job.weight,
            request: job.request,
        };
        cal.learn(seen, advice.as_deref());
        insert_sorted(g, job.used);
    }
    let mut out: Vec<Backtest> = ours
        .iter()
        .zip(&cal.levels)
        .map(|(t, l)| {
            let mut b = t.record("ours", Some(l.risk), opts.resource);
            b.level = Some(hpc_core::num::round6(l.level));
            b
        })
        .collect();
    out.extend(
        BASELINES
            .iter()
            .zip(&base)
            .map(|((name, _), t)| t.record(name, None, opts.resource)),
    );
    out
}

/// Ours against one baseline at an equal warm under-share.
#[derive(Debug, Clone, PartialEq)]
pub struct Footing {
    /// The baseline's name.
    pub baseline: String,
    /// Its warm under-share.
    pub under: f64,
    /// Its MAQ.
    pub maq: f64,
    /// Our MAQ at that under-share: our curve (warm under-share, MAQ over
    /// the risks replayed) interpolated linearly, the best of the points at
    /// or below it; for a baseline safer than our whole curve, our safest
    /// point's.
    pub ours: f64,
}

impl Footing {
    /// Whether ours is at least the baseline's MAQ there.
    pub fn holds(&self) -> bool {
        self.ours >= self.maq - 1e-9
    }
}

/// Ours against each baseline but the request (median, p95x1.2, max), at
/// each baseline's warm under-share. Empty without our records.
pub fn equal_footing(recs: &[Backtest]) -> Vec<Footing> {
    let mut curve: Vec<(f64, f64)> = recs
        .iter()
        .filter(|b| b.risk.is_some())
        .map(|b| (b.warm_under_share, b.maq))
        .collect();
    curve.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let Some(&(safest, _)) = curve.first() else {
        return Vec::new();
    };
    let at = |u: f64| -> f64 {
        if u < safest {
            return curve
                .iter()
                .filter(|p| p.0 == safest)
                .map(|p| p.1)
                .fold(f64::NEG_INFINITY, f64::max);
        }
        let mut best = curve
            .iter()
            .filter(|p| p.0 <= u)
            .map(|p| p.1)
            .fold(f64::NEG_INFINITY, f64::max);
        for w in curve.windows(2) {
            let ((u0, m0), (u1, m1)) = (w[0], w[1]);
            if u0 <= u && u <= u1 && u1 > u0 {
                best = best.max(m0 + (m1 - m0) * (u - u0) / (u1 - u0));
            }
        }
        best
    };
    recs.iter()
        .filter(|b| b.risk.is_none() && b.policy != "request")
        .map(|b| Footing {
            baseline: b.policy.clone(),
            under: b.warm_under_share,
            maq: b.maq,
            ours: at(b.warm_under_share),
        })
        .collect()
}

/// Writes the records as a table, the calibration of our policy and ours
/// against each baseline at an equal under-share.
pub fn write_text(out: &mut impl Write, recs: &[Backtest]) -> Result<()> {
    let unit = if recs.first().is_some_and(|b| b.resource == "time") {
        "h"
    } else {
        "gbh"
    };
    let mut table = Table::new(vec![
        Column::new("policy", Form::Text),
        Column::new("risk%", Form::Percent(1)),
        Column::new("jobs", Form::Int),
        Column::new("cold", Form::Int),
        Column::new("under%", Form::Percent(2)),
        Column::new("warm%", Form::Percent(2)),
        Column::new("memtime", Form::Fixed(3)),
        Column::new(format!("over_{unit}"), Form::Fixed(1)),
        Column::new(format!("under_{unit}"), Form::Fixed(1)),
        Column::new(format!("waste_{unit}"), Form::Fixed(1)),
        Column::new("maq", Form::Fixed(3)),
        Column::new("retries", Form::Fixed(3)),
    ]);
    for b in recs {
        table.row(vec![
            b.policy.as_str().into(),
            b.risk.into(),
            b.jobs.into(),
            b.cold.into(),
            b.under_share.into(),
            b.warm_under_share.into(),
            b.memtime_ratio.into(),
            b.over_gbh.into(),
            b.under_gbh.into(),
            b.wastage_gbh.into(),
            b.maq.into(),
            b.retries_per_job.into(),
        ]);
    }
    table.write(out)?;
    writeln!(
        out,
        "\ncalibration: stated risk vs observed under-share of warm jobs (level reached)"
    )?;
    for b in recs.iter().filter(|b| b.risk.is_some()) {
        writeln!(
            out,
            "{:<8} {:>5.1}% -> {:>5.2}%  (level {:.2}%)",
            b.policy,
            b.risk.unwrap_or(0.0) * 100.0,
            b.warm_under_share * 100.0,
            b.level.unwrap_or(0.0) * 100.0
        )?;
    }
    let footing = equal_footing(recs);
    if !footing.is_empty() {
        writeln!(
            out,
            "\nequal footing: our MAQ at each baseline's warm under-share (our curve interpolated)"
        )?;
    }
    for f in footing {
        writeln!(
            out,
            "{:<8} {:>6.2}% maq {:.3}   ours there {:.3}   {}",
            f.baseline,
            f.under * 100.0,
            f.maq,
            f.ours,
            if f.holds() { "ours" } else { "baseline" }
        )?;
    }
    Ok(())
}

impl BacktestArgs {
    fn mapping(&self, resource: Resource) -> Result<Mapping> {
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
                runtime: self.runtime.clone(),
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
        if self.mgnify.is_some() && resource == Resource::Time {
            return Err(Error::Usage(
                "--mgnify has no time limits: --resource mem only".into(),
            ));
        }
        map.resource = resource;
        map.input = self.input.clone().or(map.input);
        Ok(map)
    }
}

/// Reads the trace the arguments name.
fn read_trace(args: &BacktestArgs, resource: Resource, rejects: &mut Rejects) -> Result<Trace> {
    match (&args.csv, &args.nextflow) {
        (Some(_), Some(_)) => Err(Error::Usage("--csv or --nextflow, not both".into())),
        (Some(path), None) => {
            let map = args.mapping(resource)?;
            trace::read_csv(Input::named(path)?.into_reader(), &map, path, rejects)
        }
        (None, Some(path)) => {
            let text = crate::nextflow::read(Input::named(path)?.into_reader(), path, rejects)?;
            Ok(text.trace(resource))
        }
        (None, None) if args.mgnify.is_some() => {
            Err(Error::Usage("--mgnify needs --csv FILE".into()))
        }
        (None, None) => {
            let path = args.history.as_deref().unwrap_or("-");
            let h = crate::history::read_history(Input::named(path)?, rejects)?;
            let mut t = trace::from_history(&h.jobs, resource);
            // The lines read, not the jobs: 121 rejected lines of a
            // Nextflow trace given without --nextflow read "121 of 0".
            t.rows = t.rows.max(h.lines);
            if h.jobs.is_empty() && rejects.rejected > 0 {
                hpc_core::note!(
                    "hpc-model: no job record read from {}: a CSV or Nextflow trace needs --csv or --nextflow",
                    hpc_core::paths::escaped(path)
                );
            }
            Ok(t)
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
    let resource = Resource::parse(&args.resource)
        .ok_or_else(|| Error::Usage(format!("--resource {}: mem or time", args.resource)))?;
    if args.cold.is_some_and(|c| !(c > 0.0 && c <= 1e12)) {
        // NaN ran every cold job at nothing, inf gave no waste at all.
        return Err(Error::Usage(
            "--cold: a positive number, at most 1e12".into(),
        ));
    }
    let rounding = match resource {
        Resource::Mem => recommend::mem_rounding(args.mem_floor, args.mem_step)?,
        Resource::Time => recommend::TIME_ROUNDING,
    };
    let opts = Opts {
        risks: parse_risks(&args.risks)?,
        resource,
        ttf: args.ttf,
        min_earlier: args.min_earlier,
        cold: args.cold.unwrap_or(match resource {
            Resource::Mem => 4096.0,
            Resource::Time => 3600.0,
        }),
        rounding,
    };
    let mut rejects = Rejects::new("hpc-model");
    let trace = read_trace(&args, resource, &mut rejects)?;
    if trace.skipped > 0 {
        hpc_core::note!(
            "hpc-model: {} of {} rows have no positive value or did not complete: not replayed",
            trace.skipped,
            trace.rows
        );
    }
    if trace.retried > 0 {
        hpc_core::note!(
            "hpc-model: {} of the {} jobs replayed were retried in the trace (attempt > 1); each is replayed once, as its last attempt",
            trace.retried,
            trace.jobs.len()
        );
    }
    if trace.jobs.is_empty() {
        // Rejected lines first: they say why.
        rejects.finish(trace.rows)?;
        return Err(Error::Other(format!(
            "no job to replay: none of the {} rows completed with a positive value",
            trace.rows
        )));
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
