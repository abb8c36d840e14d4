//! `hpc-model plan`: what `hpc submit` does with a batch script, decided in
//! one place. The script is read once, as sbatch reads it (the directive
//! block of [`crate::sbatch`], the command line's sbatch options over it);
//! the advice of `recommend` is written back per directive in sbatch's own
//! units (memory per node, per CPU or per GPU; CPUs per task; GPUs as the
//! script asked for them) as options for sbatch's command line, which
//! override the script's directives; what the command line sets is never
//! advised over. The job itself is a small wrapper (see [`wrapper`]) that
//! runs the script unchanged under the monitor and finalizes it on every
//! exit path.
//!
//! `hpc-model spool` writes the analysis record of a submitted job, with its
//! id and user, into the spool that `hpc-store put --spool` loads.

use std::io::Write;
use std::path::Path;

use argh::FromArgs;
use hpc_core::advice::{Analysis, Rec, Tier};
use hpc_core::input::Input;
use hpc_core::ndjson::Rejects;
use hpc_core::record::write_tagged;
use hpc_core::slurm::{format_duration, format_mem};
use hpc_core::{Error, Result};
use serde::Serialize;

use crate::history::{read_analysis, read_history};
use crate::recommend::{self, RecommendInputs, MEM_ROUNDING};
use crate::sbatch::{Directives, MemPer, Scope};
use crate::tools::ToolTable;

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "plan")]
/// Plan a submission: the advice per directive in sbatch's units, the
/// options for sbatch, the wrapper that runs the script under the monitor.
pub struct PlanArgs {
    /// the batch script
    #[argh(positional)]
    script: String,
    /// the sbatch options of the command line (after --): never advised over
    #[argh(positional, greedy)]
    sbatch: Vec<String>,
    /// earlier jobs (job, summary and analysis records; a file or -)
    #[argh(option)]
    history: Option<String>,
    /// the accepted chance of running out, percent (default 1)
    #[argh(option, default = "1.0")]
    risk: f64,
    /// no advice: only the wrapper and the analysis
    #[argh(switch)]
    no_recommend: bool,
    /// write the options to pass to sbatch here, one a line
    #[argh(option)]
    options: Option<String>,
    /// the tool the script runs, by its name in the tool table (hpc
    /// interactive --tool), over what is read from the script
    #[argh(option)]
    tool: Option<String>,
    /// write the options for srun here, one a line (hpc interactive): the
    /// script's own that srun takes too, with the advice over them
    #[argh(option)]
    srun: Option<String>,
    /// write the wrapper script to submit here
    #[argh(option)]
    wrap: Option<String>,
    /// the monitor the wrapper starts (default hpc-monitor)
    #[argh(option, default = "String::from(\"hpc-monitor\")")]
    monitor: String,
    /// the finalizer the wrapper runs (default hpc-finalize)
    #[argh(option, default = "String::from(\"hpc-finalize\")")]
    finalize: String,
    /// folders the wrapper puts before the job's PATH for the monitor and
    /// the finalizer (where the tools they call are)
    #[argh(option)]
    tools_path: Option<String>,
    /// the spool the wrapper gives the monitor and the finalizer
    /// (HPC_SIZER_SPOOL)
    #[argh(option)]
    spool: Option<String>,
    /// write the analysis record here
    #[argh(option)]
    analysis: Option<String>,
    /// output: text (the changes, default), ndjson (the rec record the
    /// advice came from, then the plan record) or sbatch (the options as
    /// #SBATCH lines)
    #[argh(option, default = "String::from(\"text\")")]
    format: String,
}

/// One option the plan passes to sbatch, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `mem`, `cpus`, `time` or `gpus`.
    pub resource: String,
    /// What the script (or its defaults) asked for, as sbatch reads it.
    pub from: String,
    /// The option passed to sbatch.
    pub to: String,
    /// Why.
    pub why: String,
}

/// The `plan` record.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The script.
    pub script: String,
    /// Its interpreter (the shebang line without `#!`).
    pub interpreter: String,
    /// The options for sbatch, in order.
    pub options: Vec<String>,
    /// What they change, and why.
    pub changes: Vec<Change>,
    /// What was left as written, and why.
    pub kept: Vec<String>,
    /// The script is a heterogeneous job.
    pub hetjob: bool,
    /// The analysis record of the script (the command line included).
    pub analysis: Analysis,
}

/// `a / b` rounded up, at least 1.
fn per(total: f64, by: u32) -> f64 {
    (total / f64::from(by.max(1))).ceil().max(1.0)
}

/// What the plan gives each resource, from the recommendation `rec` for the
/// script read as `d`. The advised memory is per node (what `--mem` asks
/// for); CPUs and GPUs are the job's. CPUs and GPUs are decided first, so
/// that memory per CPU or per GPU follows the new counts, and per-unit
/// memory that is kept as written is rewritten so that the job keeps the
/// total it asked for.
fn changes(d: &Directives, rec: &Rec) -> (Vec<Change>, Vec<String>) {
    let asked = d.request();
    let (nodes, tasks) = d.nodes_tasks();
    let mut out = Vec::new();
    let mut kept = Vec::new();
    let why = |key: &str| rec.basis.get(key);
    let cold = |key: &str| why(key).map_or(true, |b| b.tier == Tier::Heuristic);
    let note = |key: &str| why(key).map_or(String::new(), |b| b.note.clone());
    for r in &d.from_cli {
        kept.push(format!("the command line sets {r}: its advice is left out"));
    }
    let cli = |r: &str| d.from_cli.contains(&r);
    // Memory the command line asks for per CPU (per GPU) is the job's as
    // written: fewer CPUs (GPUs) would give the job less of it, so their
    // count is kept too.
    let cli_mem_per = |cpu: bool| {
        cli("mem")
            && match d.mem() {
                Some(MemPer::Cpu(_)) => cpu,
                Some(MemPer::Gpu(_)) => !cpu,
                _ => false,
            }
    };
    for (cpu, unit, what) in [(true, "cpu", "CPUs"), (false, "gpu", "GPUs")] {
        if cli_mem_per(cpu) {
            kept.push(format!(
                "the command line sets --mem-per-{unit}: {what} kept, so that the job keeps that memory"
            ));
        }
    }
    // GPUs first: CPUs per GPU and memory per GPU follow the new count.
    let mut gpus = asked.gpus.unwrap_or(1);
    if let (Some(g), Some(Scope::Gpus(opt, kind)), false) =
        (rec.gpus, d.gpu_scope(), cli("gpus") || cli_mem_per(false))
    {
        if cold("gpus") || asked.gpus == Some(g) {
        } else if g == 0 {
            kept.push(format!(
                "{}; GPUs kept as written (remove the request yourself if they are not needed)",
                note("gpus")
            ));
        } else {
            let n = match opt {
                "--gpus" => g,
                "--gpus-per-task" => per(f64::from(g), tasks) as u32,
                _ => per(f64::from(g), nodes) as u32,
            };
            let spec = match &kind {
                Some(k) => format!("{k}:{n}"),
                None => n.to_string(),
            };
            let to = match opt {
                "--gres" => d.gres_with(&format!("gpu:{spec}")),
                o => format!("{o}={spec}"),
            };
            gpus = match opt {
                "--gpus" => n,
                "--gpus-per-task" => n * tasks,
                _ => n * nodes,
            };
            out.push(Change {
                resource: "gpus".into(),
                from: format!("{} GPUs in all", asked.gpus.unwrap_or(0)),
                to,
                why: note("gpus"),
            });
        }
    }
    let mut cpus = asked.cpus.unwrap_or(1);
    if let (Some(c), false, false) = (rec.cpus, cli("cpus") || cli_mem_per(true), cold("cpus")) {
        // CPUs asked for per GPU stay per GPU (SLURM refuses --cpus-per-task
        // beside --cpus-per-gpu); else per task.
        let (opt, now, units, what) = match d.cpus_per_gpu() {
            Some(now) => ("--cpus-per-gpu", now, gpus, "GPUs"),
            None => (
                "--cpus-per-task",
                (cpus / tasks.max(1)).max(1),
                tasks,
                "tasks",
            ),
        };
        let new = per(f64::from(c), units) as u32;
        if new != now {
            out.push(Change {
                resource: "cpus".into(),
                from: format!("{opt}={now} ({units} {what})"),
                to: format!("{opt}={new}"),
                why: note("cpus"),
            });
            cpus = new * units;
        }
    }
    // What memory each unit gets for `total` MiB in all.
    let per_unit = |mem: MemPer, total: f64| match mem {
        MemPer::Cpu(_) => format!("--mem-per-cpu={}", format_mem(per(total, cpus))),
        MemPer::Gpu(_) => format!("--mem-per-gpu={}", format_mem(per(total, gpus))),
        MemPer::Node(_) => format!("--mem={}", format_mem(per(total, nodes))),
    };
    let written = |mem: MemPer| match mem {
        MemPer::Cpu(v) => format!("--mem-per-cpu={}", format_mem(v)),
        MemPer::Gpu(v) => format!("--mem-per-gpu={}", format_mem(v)),
        MemPer::Node(v) => format!("--mem={}", format_mem(v)),
    };
    let mem_cold = rec.mem_mb.is_none() || cold("mem_mb");
    if cli("mem") {
    } else if mem_cold {
        // No history: what the script asks for stands, in all: per-unit
        // memory whose unit changed count is rewritten to keep the total.
        let units_changed = match d.mem() {
            Some(MemPer::Cpu(_)) => cpus != asked.cpus.unwrap_or(1),
            Some(MemPer::Gpu(_)) => gpus != asked.gpus.unwrap_or(1),
            _ => false,
        };
        match (d.mem(), asked.mem_mb) {
            (Some(mem), Some(total)) if units_changed => out.push(Change {
                resource: "mem".into(),
                from: written(mem),
                to: per_unit(mem, total),
                why: format!(
                    "no history: the memory asked for ({} in all) kept for the new count",
                    format_mem(total)
                ),
            }),
            _ if rec.mem_mb.is_none() => {}
            _ => kept.push(match (d.mem_zero(), asked.mem_mb) {
                (true, _) => "no history: --mem=0 (each node's whole memory) kept".into(),
                (false, None) => "no history and no --mem: the partition's default kept".into(),
                (false, Some(q)) => format!(
                    "no history: the memory asked for ({} in all) kept; {}",
                    format_mem(q),
                    note("mem_mb")
                ),
            }),
        }
    } else if let Some(m) = rec.mem_mb {
        let total = m * f64::from(nodes);
        let (from, to) = match d.mem() {
            Some(mem) => (written(mem), per_unit(mem, total)),
            None => ("no --mem".into(), format!("--mem={}", format_mem(m))),
        };
        if from != to {
            out.push(Change {
                resource: "mem".into(),
                from: match d.mem() {
                    Some(MemPer::Node(_)) if nodes > 1 => {
                        format!("{from} per node ({nodes} nodes)")
                    }
                    Some(MemPer::Node(_)) => format!("{from} per node"),
                    _ => from,
                },
                to,
                why: note("mem_mb"),
            });
        }
    }
    if let (Some(t), false) = (rec.time_s, cli("time")) {
        if cold("time_s") {
            if asked.time_s.is_none() {
                kept.push("no history and no --time: the partition's default kept".into());
            }
        } else if asked.time_s != Some(t) {
            out.push(Change {
                resource: "time".into(),
                from: asked.time_s.map_or("no --time".into(), |s| {
                    format!("--time={}", format_duration(s))
                }),
                to: format!("--time={}", format_duration(t)),
                why: note("time_s"),
            });
        }
    }
    (out, kept)
}

/// The text `hpc submit` (or, `srun` true, `hpc interactive`) shows: one
/// block per change, a line per kept one.
pub fn diff_text(plan: &Plan, srun: bool) -> String {
    let (cmd, to) = if srun {
        ("hpc interactive", "srun")
    } else {
        ("hpc submit", "sbatch")
    };
    if plan.changes.is_empty() && plan.kept.is_empty() {
        return format!("{cmd}: no changes to what the script asks for\n");
    }
    let mut s = format!("{cmd}: what {to} is given:\n");
    for c in &plan.changes {
        s.push_str(&format!("- {}\n+ {}\n      why: {}\n", c.from, c.to, c.why));
    }
    for k in &plan.kept {
        s.push_str(&format!("= {k}\n"));
    }
    s
}

/// `text` in single quotes for sh.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// SLURM's default limit on a batch script's size (`max_script_size` of
/// SchedulerParameters): sbatch refuses a larger one.
pub const MAX_SCRIPT: usize = 4 * 1024 * 1024;

/// The signals the wrapper passes on to the script: every one a batch
/// script can be sent (`scancel --signal`, `--signal=B:SIG@time`, the time
/// limit's TERM) that a shell can trap.
pub const FORWARDED: [&str; 8] = ["HUP", "INT", "QUIT", "ALRM", "TERM", "USR1", "USR2", "CONT"];

/// The interpreter and its one argument of a `#!` line, as the kernel reads
/// them (the path, then the rest as one argument).
fn shebang(first: &[u8]) -> Option<(String, Option<String>)> {
    let line = String::from_utf8_lossy(first.strip_prefix(b"#!")?);
    let line = line.trim_end_matches('\r').trim_matches([' ', '\t']);
    let (path, arg) = match line.split_once([' ', '\t']) {
        Some((p, a)) => (p, Some(a.trim_matches([' ', '\t']).to_string())),
        None => (line, None),
    };
    (!path.is_empty()).then(|| (path.to_string(), arg.filter(|a| !a.is_empty())))
}

/// What the job wrapper runs around the script, and how.
#[derive(Debug, Clone, Default)]
pub struct Tools {
    /// The monitor (a path).
    pub monitor: String,
    /// The finalizer (a path).
    pub finalize: String,
    /// Folders put before the job's PATH for the monitor and the finalizer,
    /// which call the other tools by name: where `hpc submit` found them.
    /// A job submitted with `--export=NONE` runs with its login PATH.
    pub path: Option<String>,
    /// The spool they write to (`HPC_SIZER_SPOOL`) where the job has none,
    /// as at submission, for the same reason. A job's own (an admin's
    /// TaskProlog exports the user's spool of the site) is kept: the
    /// monitor then finds the probe it started.
    pub spool: Option<String>,
}

impl Tools {
    /// The spool, where given (an empty one is none).
    fn spool(&self) -> Option<&str> {
        self.spool.as_deref().filter(|d| !d.is_empty())
    }

    /// The wrapper's line that sets `hpc_spool`: the job's own
    /// `HPC_SIZER_SPOOL`, else [`Tools::spool`] (quotes in an unquoted
    /// `${...:-word}` are removed as in an assignment, in every sh).
    fn preamble(&self) -> String {
        self.spool().map_or(String::new(), |d| {
            format!("hpc_spool=${{HPC_SIZER_SPOOL:-{}}}\n", sh_quote(d))
        })
    }

    /// `command` (sh text) run with [`Tools::path`] and [`Tools::spool`]
    /// (an empty one is none: an empty PATH entry is the current folder).
    fn run(&self, command: &str) -> String {
        let mut s = String::new();
        if let Some(p) = self.path.as_deref().filter(|p| !p.is_empty()) {
            s.push_str(&format!("PATH={}\"${{PATH:+:$PATH}}\" ", sh_quote(p)));
        }
        if self.spool().is_some() {
            s.push_str("HPC_SIZER_SPOOL=\"$hpc_spool\" ");
        }
        s + command
    }
}

/// What a script without a `#!` line is told.
const NOT_A_BATCH_SCRIPT: &str = "not a batch script: its first line must start with #! and name an interpreter (sbatch refuses it too)";

/// The job script sbatch is given: the directive block of `script` as
/// written (sbatch reads it there), then code that writes the script,
/// unchanged, to a private temporary file, starts the monitor, runs the file
/// through its own interpreter (the `#!` line: no exec permission needed,
/// so a noexec TMPDIR does not matter) with the job's arguments and the
/// job's standard input, passes every signal of [`FORWARDED`] on to it, and
/// on every exit path (an `exec` or a trap of the script's own included)
/// stops the monitor, runs the finalizer and exits with the script's status.
/// The script's bytes are kept as they are (a Latin-1 comment included). A
/// wrapper over [`MAX_SCRIPT`] is an error: sbatch would refuse it.
pub fn wrapper(script: &[u8], block_end: usize, tools: &Tools) -> Result<Vec<u8>> {
    let lines: Vec<&[u8]> = script.split(|b| *b == b'\n').collect();
    let Some((interp, arg)) = lines.first().and_then(|l| shebang(l)) else {
        return Err(Error::Other(NOT_A_BATCH_SCRIPT.into()));
    };
    let mut delim = String::from("HPC_SUBMIT_SCRIPT_END");
    while lines
        .iter()
        .any(|l| l.strip_suffix(b"\r").unwrap_or(l) == delim.as_bytes())
    {
        delim.push('_');
    }
    let mut w = b"#!/bin/sh\n".to_vec();
    for l in &lines[1..block_end.clamp(1, lines.len())] {
        w.extend_from_slice(l);
        w.push(b'\n');
    }
    let (mon, fin) = (sh_quote(&tools.monitor), sh_quote(&tools.finalize));
    let (start, stop) = (
        tools.run(&format!("{mon} start")),
        tools.run(&format!("{mon} stop")),
    );
    let fin = tools.run(&fin);
    let preamble = tools.preamble();
    let run = match &arg {
        Some(a) => format!("{} {}", sh_quote(&interp), sh_quote(a)),
        None => sh_quote(&interp),
    };
    // env takes a first word with '=' for a variable to set, not the
    // command: an interpreter at such a path runs without it.
    let dfl = if interp.contains('=') {
        "# (not here: env would take the interpreter's path, which holds '=', for a variable)\n"
    } else {
        "if env --default-signal=INT,QUIT true 2>/dev/null; then\n    hpc_dfl=\"env --default-signal=INT,QUIT\"\nfi\n"
    };
    let traps: String = FORWARDED
        .iter()
        .map(|s| format!("trap 'kill -{s} \"$hpc_pid\" 2>/dev/null' {s}\n"))
        .collect();
    let all = FORWARDED.join(" ");
    w.extend_from_slice(format!("# hpc submit: the script runs unchanged, with its own interpreter, under\n# the monitor; it is finalized on every exit path, keeping its exit status.\nhpc_script=$(mktemp \"${{TMPDIR:-/tmp}}/hpc-job.XXXXXX\") || exit 1\ncat >\"$hpc_script\" <<'{delim}'\n").as_bytes());
    w.extend_from_slice(script);
    if !script.ends_with(b"\n") {
        w.push(b'\n');
    }
    w.extend_from_slice(
        format!(
            r#"{delim}
{preamble}hpc_monitored=0
if {start}; then
    hpc_monitored=1
else
    echo "hpc: the monitor did not start; the job runs unmonitored" >&2
fi
# The job's standard input (sbatch --input) goes to the script: a
# background command's would be /dev/null. sh starts a background command
# with SIGINT and SIGQUIT ignored, which the script could not undo: env
# sets them back (coreutils 8.31 on; without it they stay ignored).
exec 3<&0
hpc_dfl=
{dfl}$hpc_dfl {run} "$hpc_script" "$@" <&3 3<&- &
hpc_pid=$!
exec 3<&-
{traps}while :; do
    wait "$hpc_pid"
    hpc_rc=$?
    kill -0 "$hpc_pid" 2>/dev/null || break
done
trap - {all}
if [ "$hpc_monitored" = 1 ]; then
    {stop} || :
    {fin} "$SLURM_JOB_ID" || echo "hpc: hpc-finalize $SLURM_JOB_ID failed" >&2
fi
rm -f "$hpc_script"
exit "$hpc_rc"
"#
        )
        .as_bytes(),
    );
    if w.len() > MAX_SCRIPT {
        return Err(Error::Other(format!(
            "the job script sbatch would be given is {} bytes (the script, {} bytes, and the wrapper around it), over SLURM's default limit of {} bytes (max_script_size): sbatch would refuse it; submit the script with sbatch directly, or keep its data out of it",
            w.len(),
            script.len(),
            MAX_SCRIPT
        )));
    }
    Ok(w)
}

/// Writes `bytes` to `path` privately and atomically.
fn write_file(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    hpc_core::paths::write_atomic(path.as_ref(), |w| {
        w.write_all(bytes)?;
        Ok(())
    })
}

/// Runs `hpc-model plan`.
pub fn main_with(args: PlanArgs) -> Result<()> {
    if !matches!(args.format.as_str(), "text" | "ndjson" | "sbatch") {
        return Err(Error::Usage(format!(
            "--format {}: text, ndjson or sbatch",
            args.format
        )));
    }
    if !(args.risk > 0.0 && args.risk < 100.0) {
        return Err(Error::Usage("--risk: a percentage in (0, 100)".into()));
    }
    let path = Path::new(&args.script);
    let bytes = crate::analyze::read_capped(path, false)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let shown = hpc_core::paths::shown(path);
    // Refused whatever is asked of the plan (hpc recommend too, not only
    // the wrapper submit writes): sbatch refuses such a script.
    if shebang(bytes.split(|b| *b == b'\n').next().unwrap_or_default()).is_none() {
        return Err(Error::Other(format!("{shown}: {NOT_A_BATCH_SCRIPT}")));
    }
    let d = Directives::read(&text)
        .map_err(|e| Error::Other(format!("{shown}: line {}: {}", e.line, e.reason)))?
        .with_cli(&args.sbatch)?;
    let table = ToolTable::builtin();
    let mut analysis = crate::analyze::analyze_bytes(path, bytes.clone(), &table)?;
    if let Some(t) = &args.tool {
        let name = t.to_lowercase();
        if table.tool(&name).is_none() {
            return Err(Error::Usage(format!(
                "--tool {}: not a tool of the table (man hpc-model, TOOLS)",
                hpc_core::paths::escaped(t)
            )));
        }
        analysis.tools = vec![name.clone()];
        analysis.tool = name;
    }
    analysis.request = d.request();
    analysis.user = Some(hpc_core::paths::user_name());
    let mut rejects = Rejects::new("hpc-model");
    let history = match &args.history {
        Some(p) => read_history(Input::named(p)?, &mut rejects)?,
        None => Default::default(),
    };
    let mut kept = Vec::new();
    let rec = if args.no_recommend {
        None
    } else if d.hetjob {
        kept.push("a heterogeneous job (hetjob): its components' requests are not advised from one history; submitted as written".to_string());
        None
    } else {
        let models = recommend::default_models();
        let models = models
            .exists()
            .then(|| crate::fit::Models::load(&models))
            .transpose()?;
        Some(recommend::recommend(&RecommendInputs {
            analysis: &analysis,
            history: &history.jobs,
            models: models.as_ref(),
            table: &table,
            risk: args.risk / 100.0,
            rounding: MEM_ROUNDING,
        }))
    };
    let changes = match &rec {
        Some(r) => {
            let (c, k) = changes(&d, r);
            kept.extend(k);
            c
        }
        None => Vec::new(),
    };
    if d.exclusive() {
        kept.push("--exclusive kept".into());
    }
    let plan = Plan {
        script: args.script.clone(),
        interpreter: text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("#!"))
            .unwrap_or("")
            .trim()
            .to_string(),
        options: changes.iter().map(|c| c.to.clone()).collect(),
        changes,
        kept,
        hetjob: d.hetjob,
        analysis,
    };
    if let Some(p) = &args.wrap {
        write_file(
            p,
            &wrapper(
                &bytes,
                d.block_end,
                &Tools {
                    monitor: args.monitor.clone(),
                    finalize: args.finalize.clone(),
                    path: args.tools_path.clone(),
                    spool: args.spool.clone(),
                },
            )?,
        )?;
    }
    if let Some(p) = &args.options {
        let mut s = String::new();
        for o in &plan.options {
            s.push_str(o);
            s.push('\n');
        }
        write_file(p, s.as_bytes())?;
    }
    if let Some(p) = &args.srun {
        let (options, layout) = d.srun_options(&plan.options);
        if !layout.is_empty() {
            hpc_core::note!(
                "hpc-model: srun starts one shell, one task: the script's {} left out (salloc gives the whole allocation)",
                layout.join(" ")
            );
        }
        write_file(
            p,
            options
                .iter()
                .map(|o| format!("{o}\n"))
                .collect::<String>()
                .as_bytes(),
        )?;
    }
    if let Some(p) = &args.analysis {
        let mut line = Vec::new();
        write_tagged(&mut line, "analysis", &plan.analysis)?;
        write_file(p, &line)?;
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.format.as_str() {
        "ndjson" => {
            if let Some(r) = &rec {
                write_tagged(&mut out, "rec", r)?;
            }
            write_tagged(&mut out, "plan", &plan)?
        }
        "sbatch" => {
            for o in &plan.options {
                writeln!(out, "#SBATCH {o}")?;
            }
        }
        _ => write!(out, "{}", diff_text(&plan, args.srun.is_some()))?,
    }
    out.flush()?;
    rejects.finish(history.lines)
}

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "spool")]
/// Spool the analysis record of a submitted job for hpc-store put --spool.
pub struct SpoolArgs {
    /// the analysis record (what plan --analysis wrote)
    #[argh(positional)]
    analysis: String,
    /// the id sbatch gave the job (an array's id stands for all its tasks)
    #[argh(option)]
    job_id: String,
    /// the spool folder (default HPC_SIZER_SPOOL, else the data folder's)
    #[argh(option)]
    spool: Option<String>,
}

/// Runs `hpc-model spool`: the record, with the job id and the user, into
/// `SPOOL/incoming/ID.analysis.ndjson` (private, written atomically).
pub fn spool_main(args: SpoolArgs) -> Result<()> {
    if args.job_id.is_empty()
        || !args
            .job_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+')
    {
        return Err(Error::Usage(format!(
            "--job-id '{}': a SLURM job id",
            hpc_core::paths::escaped(&args.job_id)
        )));
    }
    let mut a = read_analysis(Input::named(&args.analysis)?)?;
    a.job_id = Some(args.job_id.clone());
    if a.user.is_none() {
        a.user = Some(hpc_core::paths::user_name());
    }
    let dir = hpc_core::paths::spool_dir(args.spool.as_deref().map(Path::new)).join("incoming");
    let path = dir.join(format!("{}.analysis.ndjson", args.job_id));
    let mut line = Vec::new();
    write_tagged(&mut line, "analysis", &a)?;
    write_file(&path, &line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(script: &str, cli: &[&str], rec: Rec) -> (Vec<Change>, Vec<String>) {
        let d = Directives::read(script)
            .unwrap()
            .with_cli(&cli.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        changes(&d, &rec)
    }

    fn rec(mem: Option<f64>, cpus: Option<u32>, time: Option<f64>, tier: Tier) -> Rec {
        let mut r = Rec {
            job_id: None,
            user: None,
            tool: None,
            risk: 0.01,
            mem_mb: mem,
            cpus,
            time_s: time,
            gpus: None,
            request: None,
            basis: Default::default(),
        };
        for k in ["mem_mb", "cpus", "time_s"] {
            r.basis.insert(
                k.into(),
                hpc_core::advice::Basis {
                    tier,
                    method: "m".into(),
                    n: None,
                    quantile: None,
                    error: None,
                    note: format!("because {k}"),
                },
            );
        }
        r
    }

    #[test]
    fn a_four_node_job_is_advised_per_node_and_per_task() {
        let s = "#!/bin/sh\n#SBATCH -N 4 --ntasks-per-node=2 -c 8 --mem=100G\nsrun x\n";
        // History: 50 GiB a node (the advice is per node, as --mem), 16 CPUs
        // in all.
        let (c, _) = plan_of(s, &[], rec(Some(51200.0), Some(16), None, Tier::History));
        let to: Vec<&str> = c.iter().map(|c| c.to.as_str()).collect();
        assert_eq!(to, ["--cpus-per-task=2", "--mem=50G"]);
        // A cold start with the request as the advice changes nothing.
        let (c, _) = plan_of(s, &[], rec(Some(409600.0), Some(64), None, Tier::Heuristic));
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn the_command_line_is_never_advised_over() {
        let s = "#!/bin/sh\n#SBATCH --mem=8G -c 4\nx\n";
        let (c, kept) = plan_of(
            s,
            &["--mem=2G"],
            rec(Some(1024.0), Some(2), None, Tier::History),
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].to, "--cpus-per-task=2");
        assert!(kept[0].contains("the command line sets mem"), "{kept:?}");
    }

    #[test]
    fn memory_per_cpu_on_the_command_line_keeps_the_cpus_it_is_counted_in() {
        // -c 4 in the script, --mem-per-cpu=4G on the command line: the
        // plan cut the CPUs to 2 and left the memory per CPU, so the job
        // got 8G instead of the 16G it was submitted with.
        let s = "#!/bin/sh\n#SBATCH -c 4\nx\n";
        let (c, kept) = plan_of(
            s,
            &["--mem-per-cpu=4G"],
            rec(Some(10240.0), Some(2), None, Tier::History),
        );
        assert!(c.is_empty(), "{c:?}");
        assert!(
            kept.iter().any(|k| k.contains("--mem-per-cpu: CPUs kept")),
            "{kept:?}"
        );
        // The same with GPUs and --mem-per-gpu.
        let s = "#!/bin/sh\n#SBATCH --gpus=4\nx\n";
        let r = with_gpus(rec(Some(10240.0), None, None, Tier::History), 2);
        let (c, _) = plan_of(s, &["--mem-per-gpu=40G"], r);
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn a_cold_start_keeps_mem_zero_and_invents_no_time() {
        let s = "#!/bin/sh\n#SBATCH --mem=0 --exclusive\nx\n";
        let (c, kept) = plan_of(
            s,
            &[],
            rec(Some(2048.0), None, Some(3600.0), Tier::Heuristic),
        );
        assert!(c.is_empty(), "{c:?}");
        assert!(kept.iter().any(|k| k.contains("--mem=0")), "{kept:?}");
        assert!(kept.iter().any(|k| k.contains("no --time")), "{kept:?}");
    }

    /// `rec` with GPUs advised from history too.
    fn with_gpus(mut r: Rec, gpus: u32) -> Rec {
        r.gpus = Some(gpus);
        let b = r.basis["cpus"].clone();
        r.basis.insert("gpus".into(), b);
        r
    }

    #[test]
    fn memory_per_gpu_follows_the_new_gpu_count() {
        // Issue 29: --gpus=4 --mem-per-gpu=40G became --gpus=2 with 40G a
        // GPU still: 80 GiB against a 150 GiB peak.
        let s = "#!/bin/sh\n#SBATCH --gpus=4 --mem-per-gpu=40G\nx\n";
        let r = with_gpus(rec(Some(153600.0), None, None, Tier::History), 2);
        let (c, _) = plan_of(s, &[], r);
        let to: Vec<&str> = c.iter().map(|c| c.to.as_str()).collect();
        assert_eq!(to, ["--gpus=2", "--mem-per-gpu=75G"]);
        // Kept memory (no memory history) keeps its total for the new count.
        let r = with_gpus(rec(None, None, None, Tier::History), 2);
        let (c, _) = plan_of(s, &[], r);
        let to: Vec<&str> = c.iter().map(|c| c.to.as_str()).collect();
        assert_eq!(to, ["--gpus=2", "--mem-per-gpu=80G"]);
    }

    #[test]
    fn memory_per_cpu_kept_keeps_its_total_when_cpus_are_cut() {
        // Issue 29: -c 8 --mem-per-cpu=4G became -c 2 while the plan said
        // "32G kept": the job got 8G.
        let s = "#!/bin/sh\n#SBATCH -c 8 --mem-per-cpu=4G\nx\n";
        let mut r = rec(Some(2048.0), Some(2), None, Tier::History);
        r.basis.get_mut("mem_mb").unwrap().tier = Tier::Heuristic;
        let (c, _) = plan_of(s, &[], r);
        let to: Vec<&str> = c.iter().map(|c| c.to.as_str()).collect();
        assert_eq!(to, ["--cpus-per-task=2", "--mem-per-cpu=16G"]);
        let d = Directives::read(s)
            .unwrap()
            .with_cli(&to.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        assert_eq!(d.request().mem_mb, Some(32768.0), "32G in all, as asked");
    }

    #[test]
    fn other_gres_are_kept_and_cpus_per_gpu_stays_per_gpu() {
        // Issue 29: --gres=gpu:a100:4,lscratch:200 became --gres=gpu:a100:2.
        let s = "#!/bin/sh\n#SBATCH --gres=gpu:a100:4,lscratch:200\nx\n";
        let r = with_gpus(rec(None, None, None, Tier::History), 2);
        let (c, _) = plan_of(s, &[], r);
        assert_eq!(c[0].to, "--gres=gpu:a100:2,lscratch:200");
        // --cpus-per-gpu: the job's CPUs are read, and advised per GPU (no
        // --cpus-per-task, which SLURM refuses beside it).
        let s = "#!/bin/sh\n#SBATCH --gpus=2 --cpus-per-gpu=8\nx\n";
        let d = Directives::read(s).unwrap();
        assert_eq!(d.request().cpus, Some(16));
        let (c, _) = plan_of(s, &[], rec(None, Some(4), None, Tier::History));
        let to: Vec<&str> = c.iter().map(|c| c.to.as_str()).collect();
        assert_eq!(to, ["--cpus-per-gpu=2"]);
    }

    #[test]
    fn memory_per_cpu_stays_per_cpu() {
        let s = "#!/bin/sh\n#SBATCH --mem-per-cpu=4G -n 4\nx\n";
        let (c, _) = plan_of(s, &[], rec(Some(8192.0), Some(4), None, Tier::History));
        assert_eq!(c[0].to, "--mem-per-cpu=2G");
    }

    fn tools(monitor: &str) -> Tools {
        Tools {
            monitor: monitor.into(),
            finalize: "/f".into(),
            ..Tools::default()
        }
    }

    #[test]
    fn the_wrapper_keeps_the_block_and_embeds_the_script_unchanged() {
        let s =
            "#!/bin/tcsh\n  # indented comment\n#SBATCH -p debug\n\necho hi\n#SBATCH --mem=1G\n";
        let d = Directives::read(s).unwrap();
        let w = String::from_utf8(wrapper(s.as_bytes(), d.block_end, &tools("/m on")).unwrap())
            .unwrap();
        assert!(
            w.starts_with("#!/bin/sh\n  # indented comment\n#SBATCH -p debug\n\n# hpc submit"),
            "{w}"
        );
        assert!(
            w.contains(&format!(
                "<<'HPC_SUBMIT_SCRIPT_END'\n{s}HPC_SUBMIT_SCRIPT_END\n"
            )),
            "{w}"
        );
        assert!(w.contains("if '/m on' start; then"), "{w}");
        assert!(w.contains("'/bin/tcsh' \"$hpc_script\""), "{w}");
        assert!(wrapper(b"echo no shebang\n", 0, &tools("m")).is_err());
        assert!(wrapper(b"#!\necho no interpreter\n", 0, &tools("m")).is_err());
        // Bytes that are not UTF-8 are kept.
        let latin1 = b"#!/bin/sh\n# caf\xe9\necho\n";
        let w = wrapper(latin1, 2, &tools("m")).unwrap();
        assert!(w.windows(latin1.len()).any(|x| x == latin1));
    }

    #[test]
    fn the_interpreter_line_is_read_as_the_kernel_reads_it() {
        assert_eq!(shebang(b"#!/bin/bash"), Some(("/bin/bash".into(), None)));
        assert_eq!(
            shebang(b"#! /usr/bin/env python3 -u\r"),
            Some(("/usr/bin/env".into(), Some("python3 -u".into())))
        );
        assert_eq!(shebang(b"#!"), None);
    }

    #[test]
    fn a_wrapper_sbatch_would_refuse_is_an_error_before_submitting() {
        // Issue 29: a 4.0 MB script made an 8.4 MB wrapper, which sbatch
        // refuses (max_script_size, 4 MiB by default).
        let mut big = b"#!/bin/sh\n".to_vec();
        big.extend(std::iter::repeat_n(b"# data\n".as_slice(), 600_000).flatten());
        let e = wrapper(&big, 1, &tools("m")).unwrap_err().to_string();
        assert!(e.contains("max_script_size"), "{e}");
        // Under the limit it is given, and holds the script once.
        big.truncate(3 << 20);
        assert!(wrapper(&big, 1, &tools("m")).unwrap().len() < big.len() + 4096);
    }
}
