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

use crate::fit::{Models, PEAK};
use crate::history::{read_analysis, read_history, Past};
use crate::risk::{self, Point, Scale};
use crate::tools::ToolTable;

/// The fewest earlier jobs the history tier rests on.
pub const MIN_HISTORY: usize = 5;
/// The history tier looks at this many latest matching jobs at most.
pub const MAX_RECENT: usize = 200;
/// Memory is requested in whole steps of this many MiB.
pub const MEM_STEP_MB: f64 = 256.0;
/// Memory is never recommended below this, MiB.
pub const MEM_FLOOR_MB: f64 = 1024.0;
/// A cold start's memory before its inputs when the tool table does not
/// know the tool, MiB.
pub const DEFAULT_BASE_MB: f64 = 2048.0;
/// The time bound is multiplied by this margin.
pub const TIME_MARGIN: f64 = 1.1;
/// Time is never recommended below this, seconds.
pub const TIME_FLOOR_S: f64 = 600.0;
/// The weight, in degrees of freedom, of the spread pooled over all groups
/// (tools) in the tail fit of a small group.
pub const PRIOR_DF: f64 = 10.0;
/// CPUs follow this quantile of the cores earlier jobs used.
pub const CPU_QUANTILE: f64 = 0.9;

/// `mb` raised to the floor and rounded up to a whole step.
pub fn round_mem(mb: f64) -> f64 {
    (mb.max(MEM_FLOOR_MB) / MEM_STEP_MB).ceil() * MEM_STEP_MB
}

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "recommend")]
/// Recommend memory, CPUs, time and GPUs for a script at a stated risk.
pub struct RecommendArgs {
    /// the batch script, or a file with its analysis record (- for stdin)
    #[argh(positional)]
    script: String,
    /// earlier jobs: job, summary and analysis records (a file or -)
    #[argh(option)]
    history: Option<String>,
    /// the models file hpc-model fit writes (default beside the database)
    #[argh(option)]
    models: Option<String>,
    /// the accepted chance of running out of memory, percent (default 1)
    #[argh(option, default = "1.0")]
    risk: f64,
    /// output: text (default), ndjson or sbatch
    #[argh(option, default = "String::from(\"text\")")]
    format: String,
}

/// Everything a recommendation rests on.
pub struct Inputs<'a> {
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
}

/// The spread of peaks pooled over the tools of the history (see
/// [`risk::Prior`]).
fn memory_prior(history: &[Past]) -> Option<risk::Prior> {
    let mut by: std::collections::HashMap<Option<&str>, Vec<f64>> = Default::default();
    for p in history {
        if let Some(pt) = p.mem_point().filter(|pt| !pt.censored) {
            by.entry(p.tool.as_deref()).or_default().push(pt.value);
        }
    }
    risk::pooled_prior(by.values().map(Vec::as_slice), PRIOR_DF)
}

/// The latest earlier jobs that match the script: the same user (when both
/// are known) and the same tool (by their analysis; a job without one
/// matches by its job name).
fn matching<'a>(an: &Analysis, history: &'a [Past]) -> Vec<&'a Past> {
    let same_user = |p: &Past| match (&an.user, &p.user) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let same_tool = |p: &Past| match (&p.tool, &p.job_name, &an.request.job_name) {
        (Some(t), _, _) => *t == an.tool,
        (None, Some(n), Some(m)) => n == m,
        _ => false,
    };
    let all: Vec<&Past> = history
        .iter()
        .filter(|p| same_user(p) && same_tool(p))
        .collect();
    all[all.len().saturating_sub(MAX_RECENT)..].to_vec()
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

fn gib(mb: f64) -> String {
    format!("{:.1}G", mb / 1024.0)
}

/// The median memory-time of the jobs (see [`Past::mem_cost`]), `None`
/// with fewer than `min` that have one.
fn median_cost<'a>(jobs: impl Iterator<Item = &'a Past>, min: usize) -> Option<f64> {
    let mut costs: Vec<f64> = jobs.filter_map(Past::mem_cost).collect();
    costs.sort_by(f64::total_cmp);
    risk::median_sorted(&costs, min)
}

/// The risk memory is sized at: the stated one, lowered where the matching
/// jobs cost less memory-time than the history's typical job (see
/// [`risk::cost_scaled_risk`]); and why, when it was lowered.
fn memory_risk(i: &Inputs, past: &[&Past]) -> (f64, String) {
    let own = median_cost(past.iter().copied(), MIN_HISTORY);
    let r = risk::cost_scaled_risk(i.risk, own, median_cost(i.history.iter(), 1));
    let why = if r < i.risk {
        format!(
            " (these jobs use less memory-time than your typical job: the stated {} % lowered)",
            i.risk * 100.0
        )
    } else {
        String::new()
    };
    (r, why)
}

/// Memory: the history bound, else the model, else the heuristic.
fn memory(i: &Inputs, past: &[&Past]) -> (f64, Basis) {
    let an = i.analysis;
    let (r, lowered) = memory_risk(i, past);
    // Two significant digits are what a person reads ("0.89 %", "1 %").
    let pct = format!("{:.2}", r * 100.0)
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string();
    let points: Vec<Point> = past.iter().filter_map(|p| p.mem_point()).collect();
    if points.len() >= MIN_HISTORY {
        let prior = memory_prior(i.history);
        if let Some(b) = risk::upper_bound(&points, r, Scale::Log, prior) {
            let top = points.iter().map(|p| p.value).fold(0.0, f64::max);
            let oom = points.iter().filter(|p| p.censored).count();
            let note = format!(
                "{} earlier {} jobs of yours peaked at most {} ({oom} ran out of memory); {pct} % risk{lowered}",
                points.len(),
                an.tool,
                gib(top)
            );
            let mut why = basis(Tier::History, b.method.name(), Some(points.len()), note);
            why.quantile = Some(1.0 - r);
            return (round_mem(b.value), why);
        }
    }
    let cpus = f64::from(an.request.cpus.unwrap_or(1));
    let fitted = i
        .models
        .and_then(|m| m.find(&an.tool, an.user.as_deref(), PEAK));
    if let (Some(m), Some(x)) = (fitted, an.input_mb) {
        let err = m.error_at(r);
        let note = format!(
            "the {} model ({} jobs) predicts {} for {x:.0} MiB of input, plus {} error at {pct} % risk",
            an.tool,
            m.n,
            gib(m.predict(&[x, cpus])),
            gib(err)
        );
        let mut why = basis(
            Tier::Model,
            "regression + residual quantile",
            Some(m.n),
            note,
        );
        why.quantile = Some(1.0 - r);
        why.error = Some(hpc_core::num::round6(err));
        return (round_mem(m.predict(&[x, cpus]) + err), why);
    }
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
    let value = an.request.mem_mb.map_or(guess, |q| q.max(guess));
    let note = format!(
        "no earlier {} jobs: {} base + {} for inputs; a cold start never lowers a request",
        an.tool,
        gib(base),
        gib(inputs)
    );
    (
        round_mem(value),
        basis(Tier::Heuristic, "tool table", None, note),
    )
}

/// CPUs: the 90th percentile of the cores earlier jobs used, rounded up;
/// else the tool table's; never above the request.
fn cpus(i: &Inputs, past: &[&Past]) -> Option<(u32, Basis)> {
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
        let (v, method, note) = match asked {
            Some(a) => (a, "request", "no earlier jobs: as requested"),
            None => (
                i.table.tool(&i.analysis.tool).and_then(|t| t.cpus)?,
                "tool table",
                "no earlier jobs: the tool's usual CPUs",
            ),
        };
        (v, basis(Tier::Heuristic, method, None, note.into()))
    };
    Some((asked.map_or(value, |a| value.min(a)), why))
}

/// Time: the bound of earlier elapsed times (TIMEOUTs censored at their
/// limit) at the same risk, times the margin, in whole minutes; else the
/// request or the tool table's.
fn time(i: &Inputs, past: &[&Past]) -> Option<(f64, Basis)> {
    let points: Vec<Point> = past.iter().filter_map(|p| p.time_point()).collect();
    if points.len() >= MIN_HISTORY {
        if let Some(b) = risk::upper_bound(&points, i.risk, Scale::Log, None) {
            let v = ((b.value * TIME_MARGIN).max(TIME_FLOOR_S) / 60.0).ceil() * 60.0;
            let timeouts = points.iter().filter(|p| p.censored).count();
            let note = format!(
                "{} earlier jobs ({timeouts} timed out); bound x {TIME_MARGIN}",
                points.len()
            );
            return Some((
                v,
                basis(Tier::History, b.method.name(), Some(points.len()), note),
            ));
        }
    }
    let table = i.table.tool(&i.analysis.tool).and_then(|t| t.time_s);
    let v = i.analysis.request.time_s.or(table)?;
    Some((
        v,
        basis(
            Tier::Heuristic,
            "request",
            None,
            "no earlier jobs: as requested".into(),
        ),
    ))
}

/// The recommendation for one script.
pub fn recommend(i: &Inputs) -> Rec {
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
    if let Some((t, why)) = time(i, &past) {
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

/// The `#SBATCH` lines of a recommendation.
pub fn sbatch_lines(rec: &Rec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = rec.mem_mb {
        out.push(format!("#SBATCH --mem={}", format_mem(m)));
    }
    if let Some(c) = rec.cpus {
        out.push(format!("#SBATCH --cpus-per-task={c}"));
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

/// One line per resource: what was asked, what is advised, and why.
pub fn text_lines(rec: &Rec) -> Vec<String> {
    let req = rec.request.clone().unwrap_or_default();
    let show = |v: Option<String>| v.unwrap_or_else(|| "(none)".into());
    let rows = [
        (
            "mem_mb",
            "--mem",
            req.mem_mb.map(format_mem),
            rec.mem_mb.map(format_mem),
        ),
        (
            "cpus",
            "--cpus-per-task",
            req.cpus.map(|c| c.to_string()),
            rec.cpus.map(|c| c.to_string()),
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
                why.note
            ))
        })
        .collect()
}

/// The analysis of the script argument: an `analysis` record (stdin for
/// `-`, or a file that holds one), else the batch script analyzed.
fn analysis_of(script: &str, table: &ToolTable) -> Result<Analysis> {
    if script == "-" {
        return read_analysis(Input::named(STDIN)?);
    }
    // Read once: the script may be a pipe (`/dev/stdin`, `<(...)`).
    let bytes = crate::analyze::read_capped(Path::new(script), false)?;
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return read_analysis(Input::new(script, &bytes[..]));
    }
    crate::analyze::analyze_bytes(Path::new(script), bytes, table)
}

/// Where `fit` writes and `recommend` reads the models by default: beside
/// the database.
pub fn default_models() -> PathBuf {
    hpc_core::paths::db_path(None).with_file_name("hpc-sizer-models.json")
}

/// Runs `hpc-model recommend`.
pub fn main_with(args: RecommendArgs) -> Result<()> {
    if !matches!(args.format.as_str(), "text" | "ndjson" | "sbatch") {
        return Err(Error::Usage(format!(
            "--format {}: text, ndjson or sbatch",
            args.format
        )));
    }
    if !(args.risk > 0.0 && args.risk < 100.0) {
        return Err(Error::Usage("--risk: a percentage in (0, 100)".into()));
    }
    if args.script == "-" && args.history.as_deref() == Some("-") {
        return Err(Error::Usage(
            "the script and --history cannot both be stdin".into(),
        ));
    }
    let table = ToolTable::builtin();
    let analysis = analysis_of(&args.script, &table)?;
    let mut rejects = Rejects::new("hpc-model");
    let history = match &args.history {
        Some(p) => read_history(Input::named(p)?, &mut rejects)?,
        None => Default::default(),
    };
    let models = match &args.models {
        Some(p) => Some(Models::load(Path::new(p))?),
        None => Some(default_models())
            .filter(|p| p.exists())
            .map(|p| Models::load(&p))
            .transpose()?,
    };
    let rec = recommend(&Inputs {
        analysis: &analysis,
        history: &history.jobs,
        models: models.as_ref(),
        table: &table,
        risk: args.risk / 100.0,
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
