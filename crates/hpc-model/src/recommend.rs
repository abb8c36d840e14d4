//! `hpc-model recommend`: what to request for a script at a stated risk of
//! running out of memory, from three tiers in order: this user's earlier
//! jobs of the same tool, the fitted per-tool model, the cold-start
//! heuristic of the tool table. The formulas are in `man hpc-model`.

use std::io::Write;
use std::path::{Path, PathBuf};

use argh::FromArgs;
use hpc_core::advice::{Analysis, Basis, Rec, Tier};
use hpc_core::input::{Input, STDIN};
use hpc_core::ndjson::Rejects;
use hpc_core::record::write_tagged;
use hpc_core::slurm::{format_duration, format_mem};
use hpc_core::{Error, Result};

use crate::calib::{Calibrated, Level, Pred, Predictor, Rounding, Seen, CENSORED_FLOOR};
use crate::fit::{Models, PEAK};
use crate::history::{read_analysis, read_history, Past, PeakFrom};
use crate::risk::{self, Point};
use crate::tools::ToolTable;
use crate::trace::Resource;

/// The calibrated sizer replays at most this many latest jobs of the
/// history (about 0.1 s; a whole centre's history took minutes).
pub const MAX_REPLAY: usize = 20_000;
/// The fewest earlier jobs CPUs and GPUs are sized from.
pub const MIN_HISTORY: usize = 5;
/// CPUs and GPUs look at this many latest matching jobs at most.
pub const MAX_RECENT: usize = 200;
/// Memory by default: never below 16 MiB, in whole steps of 16 MiB. SLURM
/// counts memory in whole MiB (`--mem=16` is 16 MiB), so the floor is a
/// choice, not SLURM's: 16 MiB holds a batch shell and a small tool, which
/// is all the smallest workflow tasks need (montage's most common task
/// peaks at 3 MB). Measured with the backtest (the baselines rounded
/// alike), MAQ at 1 % on montage is 0.622 at 128/64, 0.695 at 32/32,
/// 0.713 at 16/16 and 0.740 at 4/4; the GB-sized traces (MGnify, SAP) do
/// not move, and bwa moves within 0.01 (bench/model.sh prints the rows).
pub const MEM_ROUNDING: Rounding = Rounding {
    floor: 16.0,
    step: 16.0,
};
/// Time: never below 5 minutes, in whole minutes.
pub const TIME_ROUNDING: Rounding = Rounding {
    floor: 300.0,
    step: 60.0,
};
/// A cold start's memory before its inputs when the tool table does not
/// know the tool, MiB.
pub const DEFAULT_BASE_MB: f64 = 2048.0;
/// CPUs follow this quantile of the cores earlier jobs used.
pub const CPU_QUANTILE: f64 = 0.9;

/// The largest `--mem-floor` or `--mem-step`, MiB (1 PiB: more than any
/// node has; beyond it the arithmetic of a step overflows).
pub const MAX_ROUNDING_MB: f64 = crate::history::MOST_MB;

/// The memory rounding of `--mem-floor` and `--mem-step` (MiB), checked.
pub fn mem_rounding(floor: f64, step: f64) -> Result<Rounding> {
    // Whole MiB: --mem counts nothing smaller, and a fraction would be
    // advised one thing and written another.
    let ok = |v: f64| (1.0..=MAX_ROUNDING_MB).contains(&v) && v.fract() == 0.0;
    if !(ok(floor) && ok(step)) {
        return Err(Error::Usage(format!(
            "--mem-floor and --mem-step: whole numbers of MiB, 1 to {MAX_ROUNDING_MB} (1 PiB)"
        )));
    }
    Ok(Rounding { floor, step })
}

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "recommend")]
/// Recommend memory, CPUs, time and GPUs for a script at a stated risk.
pub struct RecommendArgs {
    /// the batch script, or a file with its analysis record (- for stdin)
    #[argh(positional)]
    script: Option<String>,
    /// a Nextflow trace (-with-trace): advise each process instead
    #[argh(option)]
    nextflow: Option<String>,
    /// earlier jobs: job, summary and analysis records (a file or -)
    #[argh(option)]
    history: Option<String>,
    /// the models file hpc-model fit writes (default beside the database)
    #[argh(option)]
    models: Option<String>,
    /// the accepted chance of running out of memory (and of time), percent
    /// (default 1; above 0 and below 100)
    #[argh(option, default = "1.0")]
    risk: f64,
    /// the least memory advised, MiB (default 16)
    #[argh(option, default = "MEM_ROUNDING.floor")]
    mem_floor: f64,
    /// memory is advised in whole steps of this many MiB (default 16)
    #[argh(option, default = "MEM_ROUNDING.step")]
    mem_step: f64,
    /// output: text (default), ndjson or sbatch; with --nextflow: text,
    /// ndjson, nextflow (a config for -c) or snakemake (set-resources)
    #[argh(option, default = "String::from(\"text\")")]
    format: String,
}

/// Everything a recommendation rests on.
pub struct RecommendInputs<'a> {
    /// The script's analysis.
    pub analysis: &'a Analysis,
    /// Earlier jobs, in end-time order.
    pub history: &'a [Past],
    /// Fitted models, when there are any.
    pub models: Option<&'a Models>,
    /// The tool table.
    pub table: &'a ToolTable,
    /// The accepted risk, a fraction.
    pub risk: f64,
    /// How memory is rounded.
    pub rounding: Rounding,
}

/// The latest earlier jobs that match the script: the same user (when both
/// are known) and the same tool (by their analysis; a job without one
/// matches by its job name).
fn matching<'a>(an: &Analysis, history: &'a [Past]) -> Vec<&'a Past> {
    let all: Vec<&Past> = history.iter().filter(|p| is_match(an, p)).collect();
    all[all.len().saturating_sub(MAX_RECENT)..].to_vec()
}

/// Whether an earlier job is one of the script's own: the same user (when
/// both are known) and the same tool (by its analysis; a job without one
/// matches by its job name). A script of no known tool (`generic`) matches
/// only its own earlier jobs: the same job name (sbatch's default is the
/// script's file name) or the same script; unrelated jobs of unknown tools
/// are not pooled.
fn is_match(an: &Analysis, p: &Past) -> bool {
    let same_user = match (&an.user, &p.user) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let name = an.request.job_name.clone().or_else(|| {
        Path::new(&an.script)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    });
    let same_name = matches!((&p.job_name, &name), (Some(n), Some(m)) if n == m);
    let same_tool = if an.tool == crate::tools::GENERIC {
        let same_script = !an.script_sha256.is_empty()
            && p.script_sha256.as_deref() == Some(an.script_sha256.as_str());
        same_name || same_script
    } else {
        match &p.tool {
            Some(t) => *t == an.tool,
            None => same_name,
        }
    };
    same_user && same_tool
}

fn basis(tier: Tier, method: &str, n: Option<usize>, note: String) -> Basis {
    Basis {
        tier,
        method: method.into(),
        n: n.map(|n| n as u64),
        quantile: None,
        error: None,
        note,
    }
}

/// A size as a person reads it: MiB below 1 GiB (a 6 MiB peak is not
/// "0.0G"), else GiB with one decimal.
fn gib(mb: f64) -> String {
    if mb < 1024.0 {
        format!("{mb:.0}M")
    } else {
        format!("{:.1}G", mb / 1024.0)
    }
}

/// The group key the script's own earlier jobs are replayed under.
const THIS: &str = "\0this";

/// `r` as a person reads it: two decimals, trailing zeros dropped.
fn percent(r: f64) -> String {
    // Two decimals, or as many as a small share needs for three
    // significant digits (0.001 %, not 0 %).
    let p = r * 100.0;
    let decimals = if p > 0.0 && p < 1.0 {
        (2 - p.log10().floor() as i32).clamp(2, 12) as usize
    } else {
        2
    };
    format!("{p:.decimals$}")
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

/// Replays the history (its latest [`MAX_REPLAY`] jobs) through the
/// calibrated sizer of [`crate::calib`]
/// (the script's own earlier jobs under one group, every other user and
/// tool under its own) and returns its advice for the script: the
/// prediction, the rounded value and the level it was sized at.
fn calibrated(i: &RecommendInputs, resource: Resource) -> Option<(Pred, f64, f64, String)> {
    let an = i.analysis;
    // What a job needed, its weight, its request.
    type Of = fn(&Past) -> (Option<Point>, f64, Option<f64>);
    let (of, rounding, asked): (Of, Rounding, Option<f64>) = match resource {
        // Memory per node (the unit of --mem), the request's too.
        Resource::Mem => (
            |p| (p.mem_point(), p.elapsed_s.unwrap_or(1.0), p.req_mem_mb),
            i.rounding,
            an.request
                .mem_mb
                .map(|m| m / f64::from(an.request.nodes.unwrap_or(1).max(1))),
        ),
        Resource::Time => (
            |p| (p.time_point(), 1.0, p.timelimit_s),
            TIME_ROUNDING,
            an.request.time_s,
        ),
    };
    let recent = &i.history[i.history.len().saturating_sub(MAX_REPLAY)..];
    let keys: Vec<String> = recent
        .iter()
        .map(|p| {
            if is_match(an, p) {
                THIS.to_owned()
            } else {
                p.group()
            }
        })
        .collect();
    // The stated risk, then the higher risks of the backtest's curve: the
    // advice is never below a higher risk's (each risk's level adapts on
    // its own, and 1 % gave less than 20 % on a group with one outlier).
    let risks: Vec<f64> = std::iter::once(i.risk)
        .chain(HIGHER_RISKS.iter().copied().filter(|r| *r > i.risk))
        .collect();
    let mut cal = Calibrated::new(&risks, rounding);
    cal.replay(recent.iter().zip(&keys).filter_map(|(p, key)| {
        let (pt, weight, request) = of(p);
        let pt = pt?;
        Some(Seen {
            group: key,
            input: p.input_mb,
            value: pt.value,
            censored: pt.censored,
            weight,
            request,
        })
    }));
    let each = cal.advise_each(THIS, an.input_mb, asked)?;
    let sized = each[0];
    let (at, mut said) = level_note(&cal.levels[0], sized.level, resource);
    let above = each[1..]
        .iter()
        .zip(&cal.levels[1..])
        .filter(|(s, _)| s.value > sized.value)
        .max_by(|a, b| a.0.value.total_cmp(&b.0.value));
    let value = match above {
        Some((s, l)) => {
            said.push_str(&format!(
                "; raised to the advice at {} % risk, the most of the higher risks (each risk's level adapts on its own, and a lower risk is never given less)",
                percent(l.risk)
            ));
            s.value
        }
        None => sized.value,
    };
    Some((sized.pred, value, at, said))
}

/// The risks above the stated one whose advice the stated one's is never
/// below: the backtest's curve (`bench/model.sh`).
const HIGHER_RISKS: [f64; 7] = [0.01, 0.02, 0.03, 0.05, 0.10, 0.15, 0.20];

/// The note's account of the level a job was sized at: the stated risk,
/// and when the level differs from it, which level and why: the online
/// calibration moved the level, and the job's price of risk moved its
/// share of it.
fn level_note(l: &Level, at: f64, resource: Resource) -> (f64, String) {
    let stated = percent(l.risk);
    if (at - l.risk).abs() < 0.05 * l.risk {
        return (at, format!("{stated} % risk"));
    }
    let mut why = Vec::new();
    if (l.level - l.risk).abs() > 0.05 * l.risk {
        why.push(format!(
            "of {} earlier jobs this history sized, {} ran out ({} %), and the online calibration has the level at {} %",
            l.sized,
            l.missed,
            percent(l.missed as f64 / l.sized.max(1) as f64),
            percent(l.level)
        ));
    }
    if (at - l.level).abs() > 0.05 * l.level {
        let larger = at > l.level;
        let (saves, costs) = match (resource, larger) {
            (Resource::Mem, true) => ("memory-time", "to cost more memory-time"),
            (Resource::Mem, false) => ("memory-time", "to cost less memory-time"),
            (Resource::Time, true) => ("time", "to run longer"),
            (Resource::Time, false) => ("time", "to end sooner"),
        };
        let (varies, share) = if larger {
            ("more", "a larger")
        } else {
            ("less", "a smaller")
        };
        why.push(format!(
            "every job is sized where one more unit of risk saves the same {saves}, and this one is expected {costs}, or to vary {varies}, than the typical job of this history, so it takes {share} share of the risk"
        ));
    }
    let mut said = format!(
        "{stated} % risk overall, this job sized at the {} % level",
        percent(at)
    );
    if !why.is_empty() {
        said = format!("{said}: {}", why.join("; "));
    }
    (at, said)
}

/// How the per-node peaks of `past` were found, when any job had more than
/// one task on a node or a probe's reading: "" for one-task jobs of sacct.
fn per_node_note(past: &[&Past]) -> String {
    let probe = past
        .iter()
        .filter(|p| p.peak_from == PeakFrom::Probe)
        .count();
    let tasks = past
        .iter()
        .filter_map(|p| match p.peak_from {
            PeakFrom::Tasks(n) if n > 1 => Some(n),
            _ => None,
        })
        .max();
    let mut said = Vec::new();
    if probe > 0 {
        said.push(format!("the probe's peak of the busiest node for {probe}"));
    }
    if let Some(n) = tasks {
        said.push(format!(
            "sacct's MaxRSS (one task's peak) x the tasks on a node (up to {n}) for the others"
        ));
    }
    if said.is_empty() {
        String::new()
    } else {
        format!(" ({})", said.join("; "))
    }
}

/// The limit L a job of the group ran out at, when the advice `value` is
/// the floor of a group with such jobs ([`CENSORED_FLOOR`] L, rounded) and
/// above every value that completed: what decided it.
fn at_censored_floor(p: &Pred, value: f64, rounding: Rounding) -> Option<f64> {
    (p.censored > 0 && p.floor > p.max_seen && value <= rounding.apply(p.floor))
        .then(|| p.floor / CENSORED_FLOOR)
}

/// Memory: the calibrated sizer over the history, else the fitted model,
/// else the heuristic.
fn memory(i: &RecommendInputs, past: &[&Past]) -> (f64, Basis) {
    let an = i.analysis;
    if let Some((p, value, at, said)) = calibrated(i, Resource::Mem) {
        let (max, n) = (gib(p.max_seen), p.n);
        let own = "(its own tail decided: it cost their jobs less than a log-normal bound)";
        let floor = at_censored_floor(&p, value, i.rounding);
        let by = match p.predictor {
            _ if floor.is_some() => format!(
                ", sized at {CENSORED_FLOOR}x the largest limit one ran out at ({})",
                gib(floor.unwrap_or(0.0))
            ),
            Predictor::History => ", sized from the mean of their logs".into(),
            Predictor::Recent => ", sized from their mean weighted toward the latest".into(),
            Predictor::Empirical if p.ceiling.is_some() => {
                format!(", sized at this tool's own ceiling of {max} seen in {n} jobs {own}")
            }
            Predictor::Empirical if value <= i.rounding.apply(p.max_seen) => format!(
                ", sized among this tool's own latest values, the largest {max} seen in {n} jobs {own}"
            ),
            Predictor::Empirical => format!(
                ", sized from this tool's own largest values: {max} seen in {n} jobs, raised for a sample this small {own}"
            ),
            Predictor::Model => format!(
                ", sized by their input size ({:.0} MiB here)",
                an.input_mb.unwrap_or(0.0)
            ),
        };
        let ceiling = p.ceiling.map_or(String::new(), |m| {
            format!(
                "; its memory followed its input, yet larger inputs gave no more than {max}: advised at most {m:.3}x it"
            )
        });
        let per_node = per_node_note(past);
        let start = if n < 5 {
            "; few jobs: the spread is borrowed from the rest of the history (or a prior log-sd of 0.5 without one)"
        } else {
            ""
        };
        let seen = if p.censored >= n {
            format!(
                "{n} earlier {} jobs of yours, all of which ran out of memory",
                an.tool
            )
        } else {
            format!(
                "{n} earlier {} jobs of yours peaked at most {max} per node{per_node} ({} ran out of memory)",
                an.tool, p.censored
            )
        };
        let note = format!("{seen}{by}{ceiling}{start}; {said}");
        let tier = match p.predictor {
            Predictor::History | Predictor::Recent | Predictor::Empirical => Tier::History,
            Predictor::Model => Tier::Model,
        };
        let method = match p.predictor {
            Predictor::Empirical => "own tail, adaptive level",
            _ => "conformal, adaptive level",
        };
        let mut why = basis(tier, method, Some(p.n), note);
        why.quantile = Some(hpc_core::num::round6(1.0 - at));
        return (value, why);
    }
    let pct = percent(i.risk);
    let base = i
        .table
        .tool(&an.tool)
        .map_or(DEFAULT_BASE_MB, |t| t.base_mem_mb);
    // `+ 0.0`: an empty sum of f64 is -0.0, which would print as "-0.0G".
    let inputs: f64 = an
        .inputs
        .iter()
        .filter_map(|f| f.size_mb.map(|s| s * f.mem_factor))
        .sum::<f64>()
        + 0.0;
    let guess = base + inputs;
    let cpus = f64::from(an.request.cpus.unwrap_or(1));
    let fitted = i
        .models
        .and_then(|m| m.find(&an.tool, an.user.as_deref(), PEAK));
    if let (Some(m), Some(x)) = (fitted, an.input_mb) {
        let err = m.error_at(i.risk);
        // A cold start never lowers a request below the heuristic.
        let lower = an.request.mem_mb.map_or(0.0, |q| q.min(guess));
        let note = format!(
            "the {} model ({} jobs) predicts {} for {x:.0} MiB of input, plus {} error at {pct} % risk; never below {} (the request or the heuristic, the smaller)",
            an.tool,
            m.n,
            gib(m.predict(&[x, cpus])),
            gib(err),
            gib(lower)
        );
        let mut why = basis(
            Tier::Model,
            "regression + residual quantile",
            Some(m.n),
            note,
        );
        why.quantile = Some(1.0 - i.risk);
        why.error = Some(hpc_core::num::round6(err));
        let value = (m.predict(&[x, cpus]) + err).max(lower);
        return (i.rounding.apply(value), why);
    }
    let value = an.request.mem_mb.map_or(guess, |q| q.max(guess));
    let none = if past.is_empty() {
        format!("no earlier {} jobs", an.tool)
    } else {
        format!(
            "{} earlier {} jobs, none with a memory peak",
            past.len(),
            an.tool
        )
    };
    let note = format!(
        "{none}: {} base + {} for inputs; a cold start never lowers a request",
        gib(base),
        gib(inputs)
    );
    (
        i.rounding.apply(value),
        basis(Tier::Heuristic, "tool table", None, note),
    )
}

/// CPUs: the 90th percentile of the cores earlier jobs used, rounded up;
/// else the tool table's; never above the request.
fn cpus(i: &RecommendInputs, past: &[&Past]) -> Option<(u32, Basis)> {
    let asked = i.analysis.request.cpus;
    let mut used: Vec<f64> = past
        .iter()
        .filter_map(|p| p.cores)
        .filter(|c| c.is_finite())
        .collect();
    let (value, why) = if used.len() >= MIN_HISTORY {
        used.sort_by(f64::total_cmp);
        let q = risk::sample_quantile(&used, CPU_QUANTILE);
        let note = format!(
            "{} earlier jobs used {q:.1} cores at the 90th percentile",
            used.len()
        );
        let why = basis(Tier::History, "p90 of cores used", Some(used.len()), note);
        ((q.ceil() as u32).max(1), why)
    } else {
        // Like memory and time, a cold start never lowers a request: the
        // table's CPUs stand in only where the script asks for none.
        let few = if used.is_empty() {
            "no earlier jobs with CPU use".to_string()
        } else {
            format!(
                "{} earlier jobs with CPU use, fewer than {MIN_HISTORY}",
                used.len()
            )
        };
        let (v, method, then) = match asked {
            Some(a) => (a, "request", "as requested"),
            None => (
                i.table.tool(&i.analysis.tool).and_then(|t| t.cpus)?,
                "tool table",
                "the tool's usual CPUs",
            ),
        };
        (
            v,
            basis(Tier::Heuristic, method, None, format!("{few}: {then}")),
        )
    };
    Some((asked.map_or(value, |a| value.min(a)), why))
}

/// Time: the calibrated sizer over earlier elapsed times (TIMEOUTs
/// censored at their limit) at the stated risk of TIMEOUT, in whole
/// minutes; else the request or the tool table's (never a limit the
/// script did not have).
fn time(i: &RecommendInputs) -> Option<(f64, Basis)> {
    if let Some((p, value, at, said)) = calibrated(i, Resource::Time) {
        let seen = if p.censored >= p.n {
            format!("{} earlier jobs, all of which timed out", p.n)
        } else {
            format!(
                "{} earlier jobs ran at most {} ({} timed out)",
                p.n,
                format_duration(p.max_seen),
                p.censored
            )
        };
        let by = at_censored_floor(&p, value, TIME_ROUNDING).map_or(String::new(), |l| {
            format!(
                ", sized at {CENSORED_FLOOR}x the longest limit one timed out at ({})",
                format_duration(l)
            )
        });
        let note = format!(
            "{seen}{by}; the risk here is of TIMEOUT: {said}; a tighter limit starts sooner through backfill"
        );
        let mut why = basis(Tier::History, "conformal, adaptive level", Some(p.n), note);
        why.quantile = Some(hpc_core::num::round6(1.0 - at));
        return Some((value, why));
    }
    // The request, else the tool table's usual time: said as what it is
    // ("as requested" was said of a script that asked for no limit).
    let (v, method, then) = match i.analysis.request.time_s {
        Some(t) => (t, "request", "as requested"),
        None => (
            i.table.tool(&i.analysis.tool).and_then(|t| t.time_s)?,
            "tool table",
            "the tool's usual time (the script asks for none)",
        ),
    };
    Some((
        v,
        basis(
            Tier::Heuristic,
            method,
            None,
            format!("no earlier jobs: {then}"),
        ),
    ))
}

/// The recommendation for one script.
pub fn recommend(i: &RecommendInputs) -> Rec {
    let an = i.analysis;
    let past = matching(an, i.history);
    let mut rec = Rec {
        job_id: an.job_id.clone(),
        user: an.user.clone(),
        tool: Some(an.tool.clone()),
        risk: i.risk,
        mem_mb: None,
        cpus: None,
        time_s: None,
        gpus: an.request.gpus,
        request: Some(an.request.clone()),
        basis: Default::default(),
    };
    let (mem, why) = memory(i, &past);
    rec.mem_mb = Some(mem);
    rec.basis.insert("mem_mb".into(), why);
    if let Some((c, why)) = cpus(i, &past) {
        rec.cpus = Some(c);
        rec.basis.insert("cpus".into(), why);
    }
    if let Some((t, why)) = time(i) {
        rec.time_s = Some(t);
        rec.basis.insert("time_s".into(), why);
    }
    if let Some((g, why)) = gpus(an.request.gpus, &past) {
        rec.gpus = Some(g);
        rec.basis.insert("gpus".into(), why);
    }
    rec
}

/// GPUs: the 90th percentile of the GPUs earlier jobs actually used (a GPU
/// held but never used does not count; 0 when none was), rounded up, with
/// enough earlier jobs; else as requested; never above the request.
fn gpus(asked: Option<u32>, past: &[&Past]) -> Option<(u32, Basis)> {
    let asked = asked?;
    let mut used: Vec<f64> = past
        .iter()
        .filter_map(|p| p.gpus_used)
        .map(f64::from)
        .collect();
    if used.len() < MIN_HISTORY {
        let why = basis(Tier::Heuristic, "request", None, "GPUs as requested".into());
        return Some((asked, why));
    }
    used.sort_by(f64::total_cmp);
    let q = risk::sample_quantile(&used, CPU_QUANTILE);
    let note = format!(
        "{} earlier jobs used {q:.1} GPUs at the 90th percentile",
        used.len()
    );
    let why = basis(Tier::History, "p90 of GPUs used", Some(used.len()), note);
    Some(((q.ceil() as u32).min(asked), why))
}

/// CPUs a task of the job gets for `cpus` in all (the advice and the
/// request are the whole job's; `--cpus-per-task` is per task).
fn per_task(rec: &Rec, cpus: u32) -> u32 {
    let tasks = rec
        .request
        .as_ref()
        .and_then(|r| r.ntasks)
        .unwrap_or(1)
        .max(1);
    cpus.div_ceil(tasks)
}

/// The `#SBATCH` lines of a recommendation.
pub fn sbatch_lines(rec: &Rec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = rec.mem_mb {
        out.push(format!("#SBATCH --mem={}", format_mem(m)));
    }
    if let Some(c) = rec.cpus {
        out.push(format!("#SBATCH --cpus-per-task={}", per_task(rec, c)));
    }
    if let Some(t) = rec.time_s {
        out.push(format!("#SBATCH --time={}", format_duration(t)));
    }
    // No GPU line when none is advised.
    if let Some(g) = rec.gpus.filter(|g| *g > 0) {
        out.push(format!("#SBATCH --gpus={g}"));
    }
    out
}

/// One line per resource: what was asked, what is advised (memory per
/// node and CPUs per task, as `--mem` and `--cpus-per-task` count them),
/// and why, control characters escaped.
pub fn text_lines(rec: &Rec) -> Vec<String> {
    let req = rec.request.clone().unwrap_or_default();
    let show = |v: Option<String>| v.unwrap_or_else(|| "(none)".into());
    let nodes = f64::from(req.nodes.unwrap_or(1).max(1));
    let rows = [
        (
            "mem_mb",
            "--mem",
            req.mem_mb.map(|m| format_mem(m / nodes)),
            rec.mem_mb.map(format_mem),
        ),
        (
            "cpus",
            "--cpus-per-task",
            req.cpus.map(|c| per_task(rec, c).to_string()),
            rec.cpus.map(|c| per_task(rec, c).to_string()),
        ),
        (
            "time_s",
            "--time",
            req.time_s.map(format_duration),
            rec.time_s.map(format_duration),
        ),
        (
            "gpus",
            "--gpus",
            req.gpus.map(|g| g.to_string()),
            rec.gpus.map(|g| g.to_string()),
        ),
    ];
    rows.into_iter()
        .filter_map(|(key, flag, from, to)| {
            let why = rec.basis.get(key)?;
            Some(format!(
                "{flag} {} -> {}: {}",
                show(from),
                show(to),
                hpc_core::paths::escaped(&why.note)
            ))
        })
        .collect()
}

/// The analysis of the script argument: an `analysis` record (stdin for
/// `-`, or a file that holds one), else the batch script analyzed, as the
/// caller's unless the record names its user (a history that holds other
/// users' jobs, an admin's dump, is not pooled as theirs: `hpc-model
/// analyze S | hpc-model recommend -` counted another user's jobs as
/// "of yours").
fn analysis_of(script: &str, table: &ToolTable) -> Result<Analysis> {
    let mut a = if script == "-" {
        read_analysis(Input::named(STDIN)?)?
    } else {
        // Read once: the script may be a pipe (`/dev/stdin`, `<(...)`).
        let bytes = crate::analyze::read_capped(Path::new(script), false)?;
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            read_analysis(Input::new(script, &bytes[..]))?
        } else {
            crate::analyze::analyze_bytes(Path::new(script), bytes, table)?
        }
    };
    a.user.get_or_insert_with(hpc_core::paths::user_name);
    Ok(a)
}

/// Where `fit` writes and `recommend` reads the models by default: beside
/// the database.
pub fn default_models() -> PathBuf {
    hpc_core::paths::db_path(None).with_file_name("hpc-sizer-models.json")
}

/// Runs `hpc-model recommend`.
pub fn main_with(args: RecommendArgs) -> Result<()> {
    if !(args.risk > 0.0 && args.risk < 100.0) {
        return Err(Error::Usage("--risk: a percentage in (0, 100)".into()));
    }
    let rounding = mem_rounding(args.mem_floor, args.mem_step)?;
    let script = match (&args.nextflow, &args.script) {
        (Some(trace), None) => return nextflow_main(&args, trace, rounding),
        (None, Some(s)) => s.clone(),
        (Some(_), Some(_)) => {
            return Err(Error::Usage(
                "a script or --nextflow TRACE, not both".into(),
            ))
        }
        (None, None) => return Err(Error::Usage("a script or --nextflow TRACE".into())),
    };
    if !matches!(args.format.as_str(), "text" | "ndjson" | "sbatch") {
        return Err(Error::Usage(format!(
            "--format {}: text, ndjson or sbatch",
            args.format
        )));
    }
    if script == "-" && args.history.as_deref() == Some("-") {
        return Err(Error::Usage(
            "the script and --history cannot both be stdin".into(),
        ));
    }
    let table = ToolTable::builtin();
    let analysis = analysis_of(&script, &table)?;
    let mut rejects = Rejects::new("hpc-model");
    let history = match &args.history {
        Some(p) => read_history(Input::named(p)?, &mut rejects)?,
        None => {
            // The note says "no earlier jobs": say why, once.
            hpc_core::note!(
                "hpc-model: no --history given: sized without earlier jobs (hpc-store dump --kind job,summary,analysis --user $USER | hpc-model recommend SCRIPT --history -)"
            );
            Default::default()
        }
    };
    let models = match &args.models {
        Some(p) => Some(Models::load(Path::new(p))?),
        None => Some(default_models())
            .filter(|p| p.exists())
            .map(|p| Models::load(&p))
            .transpose()?,
    };
    let rec = recommend(&RecommendInputs {
        analysis: &analysis,
        history: &history.jobs,
        models: models.as_ref(),
        table: &table,
        risk: args.risk / 100.0,
        rounding,
    });
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.format.as_str() {
        "ndjson" => write_tagged(&mut out, "rec", &rec)?,
        "sbatch" => sbatch_lines(&rec)
            .iter()
            .try_for_each(|l| writeln!(out, "{l}"))?,
        _ => text_lines(&rec)
            .iter()
            .try_for_each(|l| writeln!(out, "{l}"))?,
    }
    out.flush()?;
    rejects.finish(history.lines)
}

/// `recommend --nextflow TRACE`: the advice per process of the trace.
fn nextflow_main(args: &RecommendArgs, trace: &str, rounding: Rounding) -> Result<()> {
    if !matches!(
        args.format.as_str(),
        "text" | "ndjson" | "nextflow" | "snakemake"
    ) {
        return Err(Error::Usage(format!(
            "--format {} with --nextflow: text, ndjson, nextflow or snakemake",
            args.format
        )));
    }
    let mut rejects = Rejects::new("hpc-model");
    let nf = crate::nextflow::read(Input::named(trace)?.into_reader(), trace, &mut rejects)?;
    let (advice, mem, time) = nf.advise(args.risk / 100.0, rounding, TIME_ROUNDING);
    let header = format!(
        "hpc-model recommend --nextflow {} --risk {}: {} processes, {} tasks; calibrated levels reached: memory {} %, time {} % (see man hpc-model, CALIBRATION)",
        hpc_core::paths::escaped(trace),
        args.risk,
        advice.len(),
        nf.tasks.len(),
        percent(mem.level),
        percent(time.level)
    )
    .replace('\n', " ");
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.format.as_str() {
        "nextflow" => write!(out, "{}", crate::nextflow::to_nextflow(&advice, &header))?,
        "snakemake" => write!(out, "{}", crate::nextflow::to_snakemake(&advice, &header))?,
        "ndjson" => {
            for a in &advice {
                write_tagged(&mut out, "process_rec", a)?;
            }
        }
        _ => {
            writeln!(out, "{header}")?;
            for a in &advice {
                let mem = a.mem_mb.map_or("(too few tasks)".into(), format_mem);
                let time = a.time_s.map_or("(too few tasks)".into(), format_duration);
                writeln!(
                    out,
                    "{}: {} tasks, memory {mem}, time {time}",
                    hpc_core::paths::escaped(&a.process),
                    a.tasks
                )?;
            }
        }
    }
    out.flush()?;
    rejects.finish(nf.rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_small_risk_is_shown_with_its_digits() {
        assert_eq!(super::percent(0.00001), "0.001");
        assert_eq!(super::percent(0.005), "0.5");
        assert_eq!(super::percent(0.01), "1");
        assert_eq!(super::percent(0.125), "12.5");
    }
}
