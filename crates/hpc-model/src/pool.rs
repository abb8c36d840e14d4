//! `hpc-model pool`: how many jobs a user's group can run at once across its
//! SLURM accounts, how many of them are free now, and where to send the
//! next one.
//!
//! [`slurm_text`] reads what SLURM says (associations, QOS, partitions, the
//! queue), [`limits`] finds the limit that applies to each association and
//! what is in use against it, [`slots`] does the arithmetic, [`render`]
//! writes text, `pool` records or sbatch flags.

use std::io::{Read, Write};
use std::str::FromStr;

use argh::FromArgs;
use hpc_core::input::Input;
use hpc_core::slurm::{parse_duration, parse_mem};
use hpc_core::{Error, Result};

pub mod limits;
pub mod render;
pub mod slots;
pub mod slurm_text;

use crate::history::{read_first, Item};
use limits::{Resolved, Sources};
use slots::{capacity, left, Shape, SlotRule, Slots};
use slurm_text::Amounts;

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "pool")]
/// How many jobs can run at once across your SLURM accounts (GPU and
/// CPU-only slots within every limit), how many are free now, and where to
/// send the next one.
#[argh(
    example = "hpc-model pool --gpu-job cpus=8,mem=180G,gpus=1 --cpu-job cpus=8,mem=48G",
    example = "sbatch $(hpc-model pool --from rec.ndjson --next cpu --format sbatch) job.sbatch",
    example = "hpc-model pool --cpu-job cpus=8,mem=48G --assoc assoc.txt --qos qos.txt --partitions part.txt --usage queue.txt",
    note = "Exit status: 0 success, 1 a failure (a SLURM command that fails, unreadable input), 2 usage error, 3 --next found no account with a free slot now."
)]
pub struct PoolArgs {
    /// the GPU job: cpus=N,mem=SIZE,gpus=N
    #[argh(option)]
    pub gpu_job: Option<String>,
    /// the CPU-only job: cpus=N,mem=SIZE
    #[argh(option)]
    pub cpu_job: Option<String>,
    /// take the job shapes (and time) from the first analysis or rec record of FILE (- for stdin)
    #[argh(option)]
    pub from: Option<String>,
    /// the GPU job's time limit, [D-]HH:MM:SS (for --format sbatch)
    #[argh(option)]
    pub time: Option<String>,
    /// the CPU job's time is the GPU job's times this (default 5)
    #[argh(option, default = "5.0")]
    pub cpu_time_factor: f64,
    /// the user whose associations are sized (default $USER)
    #[argh(option)]
    pub user: Option<String>,
    /// only this account, in the order given (repeatable)
    #[argh(option)]
    pub account: Vec<String>,
    /// skip this account (repeatable, or a comma list)
    #[argh(option)]
    pub block: Vec<String>,
    /// include burst accounts (names ending in -b), skipped by default
    #[argh(switch)]
    pub burst: bool,
    /// the share of a CPU limit to fill, in (0, 1] (default 0.85)
    #[argh(option, default = "0.85")]
    pub headroom: f64,
    /// bounded (every TRES of the limit, the default) or cpu-only (the plain CPU-count rule)
    #[argh(option, default = "SlotRule::Bounded")]
    pub rule: SlotRule,
    /// name the account, partition and QOS for the next job: gpu or cpu
    #[argh(option)]
    pub next: Option<Kind>,
    /// text (default), ndjson or sbatch (the flags for --next)
    #[argh(option, default = "Format::Text")]
    pub format: Format,
    /// read the associations from FILE instead of running sacctmgr
    #[argh(option)]
    pub assoc: Option<String>,
    /// read the QOS from FILE instead of running sacctmgr
    #[argh(option)]
    pub qos: Option<String>,
    /// read the partitions from FILE instead of running scontrol
    #[argh(option)]
    pub partitions: Option<String>,
    /// read the running and pending jobs from FILE instead of running squeue
    #[argh(option)]
    pub usage: Option<String>,
}

/// Which kind of job `--next` places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A GPU job.
    Gpu,
    /// A CPU-only job.
    Cpu,
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Kind, String> {
        match s {
            "gpu" => Ok(Kind::Gpu),
            "cpu" => Ok(Kind::Cpu),
            _ => Err(format!("'{s}': gpu or cpu")),
        }
    }
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A table for a person.
    Text,
    /// `pool` records, then a `pool_total` record.
    Ndjson,
    /// The sbatch flags for the `--next` job.
    Sbatch,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Format, String> {
        match s {
            "text" => Ok(Format::Text),
            "ndjson" => Ok(Format::Ndjson),
            "sbatch" => Ok(Format::Sbatch),
            _ => Err(format!("'{s}': text, ndjson or sbatch")),
        }
    }
}

/// The checked options.
#[derive(Debug, Clone)]
pub struct Opts {
    /// The GPU job, when one is sized.
    pub gpu_job: Option<Shape>,
    /// The CPU-only job, when one is sized.
    pub cpu_job: Option<Shape>,
    /// The GPU job's time limit, seconds.
    pub time_s: Option<f64>,
    /// The CPU job's time over the GPU job's.
    pub cpu_time_factor: f64,
    /// Whose associations.
    pub user: String,
    /// Only these accounts, in this order (empty: all).
    pub accounts: Vec<String>,
    /// Accounts skipped.
    pub block: Vec<String>,
    /// Whether burst accounts count.
    pub burst: bool,
    /// The CPU headroom.
    pub headroom: f64,
    /// The slot rule.
    pub rule: SlotRule,
    /// The `--next` kind.
    pub next: Option<Kind>,
    /// The output format.
    pub format: Format,
}

/// Parses the job shape given to `flag` (`--gpu-job cpus=8,mem=180G,gpus=1`;
/// memory without a unit is MiB). A bad shape is a usage error that names
/// the flag.
pub fn parse_shape(flag: &str, s: &str, gpus_needed: bool) -> Result<Shape> {
    shape(s, gpus_needed).map_err(|e| Error::Usage(format!("{flag} {e}")))
}

/// The shape, or why `s` is not one.
fn shape(s: &str, gpus_needed: bool) -> std::result::Result<Shape, String> {
    let mut shape = Shape::default();
    let (mut cpus, mut mem) = (false, false);
    let mut seen: Vec<&str> = Vec::new();
    for item in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}': not key=value"))?;
        if seen.contains(&k) {
            return Err(format!("'{k}' given twice"));
        }
        seen.push(k);
        let count = || {
            v.parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .map(f64::from)
                .ok_or_else(|| format!("{k}: '{v}' is not a positive count"))
        };
        match k {
            "cpus" => (shape.cpus, cpus) = (count()?, true),
            "gpus" => shape.gpus = count()?,
            "mem" => {
                // A job's memory: `48Gc` (per CPU) or `48Gn` would be
                // read as 48G with its scope dropped.
                let m = parse_mem(v, 1024.0 * 1024.0)?
                    .filter(|m| m.mb > 0.0 && m.scope == hpc_core::slurm::MemScope::Total);
                shape.mem_mb = m.ok_or_else(|| format!("mem: '{v}' is not a size"))?.mb;
                mem = true;
            }
            _ => return Err(format!("'{k}': the keys are cpus, mem and gpus")),
        }
    }
    if !cpus || !mem {
        return Err(format!("'{s}': needs cpus= and mem="));
    }
    if gpus_needed && shape.gpus == 0.0 {
        return Err(format!("'{s}': a GPU job needs gpus="));
    }
    if !gpus_needed && shape.gpus > 0.0 {
        return Err(format!("'{s}': a CPU job takes no gpus="));
    }
    Ok(shape)
}

/// What an `analysis` or `rec` record asks for: (cpus, mem MiB, gpus, time s).
type Asked = (Option<u32>, Option<f64>, Option<u32>, Option<f64>);

/// The first `analysis` or `rec` record of a file, as what it asks for.
fn read_asked(path: &str) -> Result<Asked> {
    read_first(Input::named(path)?, "analysis or rec", |item| match item {
        Item::Analysis(a) => {
            let r = a.request;
            Some((r.cpus, r.mem_mb, r.gpus, r.time_s))
        }
        Item::Rec(r) => Some((r.cpus, r.mem_mb, r.gpus, r.time_s)),
        _ => None,
    })
}

/// The job shapes a record gives: the GPU job when it asks for GPUs, and
/// the same job on CPUs alone.
fn shapes_from(asked: Asked, path: &str) -> Result<(Option<Shape>, Shape)> {
    let (cpus, mem, gpus, _) = asked;
    let mem_mb = mem.filter(|m| *m > 0.0).ok_or_else(|| {
        Error::Other(format!(
            "{}: the record gives no memory",
            hpc_core::paths::shown(std::path::Path::new(path))
        ))
    })?;
    let cpu = Shape {
        cpus: f64::from(cpus.unwrap_or(1).max(1)),
        mem_mb,
        gpus: 0.0,
    };
    let gpu = gpus.filter(|g| *g > 0).map(|g| Shape {
        gpus: f64::from(g),
        ..cpu
    });
    Ok((gpu, cpu))
}

impl Opts {
    /// Checks the arguments (reading `--from` when given).
    pub fn from_args(a: &PoolArgs) -> Result<Opts> {
        let usage = |e: String| Error::Usage(e);
        let mut gpu_job = a
            .gpu_job
            .as_deref()
            .map(|s| parse_shape("--gpu-job", s, true))
            .transpose()?;
        let mut cpu_job = a
            .cpu_job
            .as_deref()
            .map(|s| parse_shape("--cpu-job", s, false))
            .transpose()?;
        let mut time_s = a
            .time
            .as_deref()
            .map(|t| match parse_duration(t) {
                Ok(Some(v)) if v > 0.0 => Ok(v),
                _ => Err(usage(format!("--time '{t}': not a duration"))),
            })
            .transpose()?;
        if let Some(path) = &a.from {
            let asked = read_asked(path)?;
            let (gpu, cpu) = shapes_from(asked, path)?;
            gpu_job = gpu_job.or(gpu);
            cpu_job = cpu_job.or(Some(cpu));
            time_s = time_s.or(asked.3);
        }
        if gpu_job.is_none() && cpu_job.is_none() {
            return Err(usage("give --gpu-job, --cpu-job or --from".into()));
        }
        if !(a.headroom > 0.0 && a.headroom <= 1.0) {
            return Err(usage(format!("--headroom {}: not in (0, 1]", a.headroom)));
        }
        if !(a.cpu_time_factor > 0.0 && a.cpu_time_factor.is_finite()) {
            return Err(usage("--cpu-time-factor: must be above 0".into()));
        }
        match (a.next, a.format, gpu_job, cpu_job) {
            (None, Format::Sbatch, ..) => Err(usage("--format sbatch needs --next".into())),
            (Some(Kind::Gpu), _, None, _) => Err(usage("--next gpu needs a GPU job".into())),
            (Some(Kind::Cpu), _, _, None) => Err(usage("--next cpu needs a CPU job".into())),
            _ => Ok(()),
        }?;
        let user = a.user.clone().unwrap_or_else(hpc_core::paths::user_name);
        Ok(Opts {
            gpu_job,
            cpu_job,
            time_s,
            cpu_time_factor: a.cpu_time_factor,
            user,
            accounts: a.account.clone(),
            block: a
                .block
                .iter()
                .flat_map(|b| b.split(','))
                .map(str::to_string)
                .collect(),
            burst: a.burst,
            headroom: a.headroom,
            rule: a.rule,
            next: a.next,
            format: a.format,
        })
    }
}

/// The texts SLURM gave, each with where it came from (a file or a command).
#[derive(Debug, Clone, Default)]
pub struct SlurmTexts {
    /// Associations: (source, text).
    pub assoc: (String, String),
    /// QOS.
    pub qos: (String, String),
    /// Partitions.
    pub partitions: (String, String),
    /// The queue.
    pub usage: (String, String),
}

/// Reads a recorded output, or runs its command.
fn read_or_run(file: Option<&str>, cmd: &[&str]) -> Result<(String, String)> {
    match file {
        Some(path) => {
            let shown = hpc_core::paths::shown(std::path::Path::new(path));
            let mut text = String::new();
            Input::named(path)?
                .into_reader()
                .read_to_string(&mut text)
                .map_err(|e| Error::Other(format!("{shown}: {e}")))?;
            Ok((shown, text))
        }
        None => Ok((cmd[0].to_string(), slurm_text::run_command(cmd)?)),
    }
}

impl SlurmTexts {
    /// Each from its file when given, else from its command.
    pub fn gather(a: &PoolArgs) -> Result<SlurmTexts> {
        if [&a.assoc, &a.qos, &a.partitions, &a.usage]
            .iter()
            .filter(|f| f.as_deref() == Some("-"))
            .count()
            > 1
        {
            return Err(Error::Usage(
                "only one of --assoc, --qos, --partitions, --usage can be -".into(),
            ));
        }
        Ok(SlurmTexts {
            assoc: read_or_run(a.assoc.as_deref(), slurm_text::ASSOC_CMD)?,
            qos: read_or_run(a.qos.as_deref(), slurm_text::QOS_CMD)?,
            partitions: read_or_run(a.partitions.as_deref(), slurm_text::PARTITIONS_CMD)?,
            usage: read_or_run(a.usage.as_deref(), slurm_text::USAGE_CMD)?,
        })
    }
}

/// One association sized.
#[derive(Debug, Clone)]
pub struct Row {
    /// The association and its limits.
    pub pool: Resolved,
    /// The limits per TRES.
    pub limits: Amounts,
    /// What is in use against them.
    pub used: Amounts,
    /// The slots under the chosen rule.
    pub slots: Slots,
    /// The slots under the other rule (for the totals with and without the memory bound).
    pub other: Slots,
    /// The slots free now under the chosen rule.
    pub free: Slots,
}

/// Every association sized, and the ones skipped with why.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The sized ones, in order.
    pub rows: Vec<Row>,
    /// (account, reason) of the skipped ones.
    pub skipped: Vec<(String, &'static str)>,
}

/// Sizes one association.
fn size(opts: &Opts, pool: Resolved) -> Row {
    let mut limits = Amounts::default();
    let mut used = Amounts::default();
    for (r, l) in &pool.limits {
        limits.set(*r, Some(l.value));
        used.set(*r, Some(l.used));
    }
    let cap = capacity(&limits, opts.headroom);
    let (g, c) = (opts.gpu_job.as_ref(), opts.cpu_job.as_ref());
    let other = match opts.rule {
        SlotRule::Bounded => SlotRule::CpuOnly,
        SlotRule::CpuOnly => SlotRule::Bounded,
    };
    Row {
        slots: slots::slots(opts.rule, &cap, g, c),
        other: slots::slots(other, &cap, g, c),
        free: slots::slots(opts.rule, &left(&cap, &used), g, c),
        pool,
        limits,
        used,
    }
}

/// Reads what SLURM gave and sizes the user's associations.
pub fn plan(opts: &Opts, inputs: &SlurmTexts) -> Result<Plan> {
    let assocs = slurm_text::parse_assoc(&inputs.assoc.1, &inputs.assoc.0)?;
    let qos = slurm_text::parse_qos(&inputs.qos.1, &inputs.qos.0)?;
    let partitions = slurm_text::parse_partitions(&inputs.partitions.1, &inputs.partitions.0)?;
    let jobs = slurm_text::parse_usage(&inputs.usage.1, &inputs.usage.0)?;
    let sources = Sources {
        user: &opts.user,
        assocs: &assocs,
        qos: &qos,
        partitions: &partitions,
        jobs: &jobs,
    };
    let mut all = sources.resolve_all();
    if all.is_empty() {
        return Err(Error::Other(format!(
            "user {} has no association",
            opts.user
        )));
    }
    if !opts.accounts.is_empty() {
        if let Some(a) = opts
            .accounts
            .iter()
            .find(|a| !all.iter().any(|p| p.account == **a))
        {
            return Err(Error::Other(format!(
                "--account {a}: user {} has no association in it",
                opts.user
            )));
        }
        let rank = |p: &Resolved| opts.accounts.iter().position(|a| *a == p.account);
        all.retain(|p| rank(p).is_some());
        all.sort_by_key(|p| rank(p));
    }
    let mut out = Plan::default();
    for p in all {
        if opts.block.contains(&p.account) {
            out.skipped.push((p.account, "blocked"));
        } else if p.account.ends_with("-b") && !opts.burst {
            out.skipped.push((p.account, "burst"));
        } else {
            out.rows.push(size(opts, p));
        }
    }
    Ok(out)
}

/// The row `--next` names: the most free slots of that kind, ties by order.
pub fn next(plan: &Plan, kind: Kind) -> Option<&Row> {
    let free = |r: &Row| match kind {
        Kind::Gpu => r.free.gpu,
        Kind::Cpu => r.free.cpu,
    };
    let mut best: Option<&Row> = None;
    for r in plan.rows.iter().filter(|r| free(r) != Some(0)) {
        // None (no limit) is more than any number.
        let more = best.map_or(true, |b| match (free(r), free(b)) {
            (None, Some(_)) => true,
            (Some(x), Some(y)) => x > y,
            _ => false,
        });
        if more {
            best = Some(r);
        }
    }
    best
}

/// Whether `--next` found an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written (with a free account when `--next` was asked).
    Done,
    /// `--next` found no account with a free slot now.
    NoneFree,
}

/// Writes the pools (and the `--next` choice) in the chosen format.
pub fn run(opts: &Opts, inputs: &SlurmTexts, out: &mut impl Write) -> Result<Outcome> {
    let plan = plan(opts, inputs)?;
    let chosen = opts.next.map(|k| (k, next(&plan, k)));
    match opts.format {
        Format::Text => render::text(opts, &plan, chosen, out)?,
        Format::Ndjson => render::ndjson(opts, &plan, out)?,
        Format::Sbatch => {
            if let Some((k, Some(row))) = chosen {
                render::sbatch(opts, row, k, out)?;
            }
        }
    }
    out.flush()?;
    match chosen {
        Some((k, None)) => {
            hpc_core::note!("hpc-model pool: {}", render::none_free(&plan, k));
            Ok(Outcome::NoneFree)
        }
        _ => Ok(Outcome::Done),
    }
}

/// Runs `hpc-model pool`; exits 3 when `--next` finds no free account.
pub fn main_with(args: PoolArgs) -> Result<()> {
    let opts = Opts::from_args(&args)?;
    let inputs = SlurmTexts::gather(&args)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if run(&opts, &inputs, &mut out)? == Outcome::NoneFree {
        std::process::exit(3);
    }
    Ok(())
}
