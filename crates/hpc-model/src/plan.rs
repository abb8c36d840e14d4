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
    /// write the wrapper script to submit here
    #[argh(option)]
    wrap: Option<String>,
    /// the monitor the wrapper starts (default hpc-monitor)
    #[argh(option, default = "String::from(\"hpc-monitor\")")]
    monitor: String,
    /// the finalizer the wrapper runs (default hpc-finalize)
    #[argh(option, default = "String::from(\"hpc-finalize\")")]
    finalize: String,
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
/// script read as `d`.
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
    // CPUs first: memory per CPU follows the new count.
    let mut cpus = asked.cpus.unwrap_or(1);
    if let (Some(c), false) = (rec.cpus, cli("cpus")) {
        let (now, new) = (
            asked.cpus.unwrap_or(1) / tasks.max(1),
            per(f64::from(c), tasks) as u32,
        );
        if !cold("cpus") && new != now.max(1) {
            out.push(Change {
                resource: "cpus".into(),
                from: format!("--cpus-per-task={} ({} tasks)", now.max(1), tasks),
                to: format!("--cpus-per-task={new}"),
                why: note("cpus"),
            });
            cpus = new * tasks;
        }
    }
    if let (Some(m), false) = (rec.mem_mb, cli("mem")) {
        if cold("mem_mb") {
            // No history: what the script asks for stands.
            kept.push(match (d.mem_zero(), asked.mem_mb) {
                (true, _) => "no history: --mem=0 (each node's whole memory) kept".into(),
                (false, None) => "no history and no --mem: the partition's default kept".into(),
                (false, Some(q)) => format!(
                    "no history: the memory asked for ({} in all) kept; {}",
                    format_mem(q),
                    note("mem_mb")
                ),
            });
        } else {
            let gpus = asked.gpus.unwrap_or(1);
            let (from, to) = match d.mem() {
                Some(MemPer::Cpu(v)) => (
                    format!("--mem-per-cpu={}", format_mem(v)),
                    format!("--mem-per-cpu={}", format_mem(per(m, cpus))),
                ),
                Some(MemPer::Gpu(v)) => (
                    format!("--mem-per-gpu={}", format_mem(v)),
                    format!("--mem-per-gpu={}", format_mem(per(m, gpus))),
                ),
                Some(MemPer::Node(v)) => (
                    format!("--mem={} per node", format_mem(v)),
                    format!("--mem={}", format_mem(per(m, nodes))),
                ),
                None => (
                    "no --mem".into(),
                    format!("--mem={}", format_mem(per(m, nodes))),
                ),
            };
            if from.split(' ').next() != Some(to.as_str()) {
                out.push(Change {
                    resource: "mem".into(),
                    from,
                    to,
                    why: note("mem_mb"),
                });
            }
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
    if let (Some(g), Some(Scope::Gpus(opt, kind)), false) = (rec.gpus, d.gpu_scope(), cli("gpus")) {
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
            let to = match (opt, &kind) {
                ("--gres", Some(k)) => format!("--gres=gpu:{k}:{n}"),
                ("--gres", None) => format!("--gres=gpu:{n}"),
                (o, Some(k)) => format!("{o}={k}:{n}"),
                (o, None) => format!("{o}={n}"),
            };
            out.push(Change {
                resource: "gpus".into(),
                from: format!("{} GPUs in all", asked.gpus.unwrap_or(0)),
                to,
                why: note("gpus"),
            });
        }
    }
    (out, kept)
}

/// The text `hpc submit` shows: one block per change, a line per kept one.
pub fn diff_text(plan: &Plan) -> String {
    if plan.changes.is_empty() && plan.kept.is_empty() {
        return "hpc submit: no changes to what the script asks for\n".into();
    }
    let mut s = String::from("hpc submit: what sbatch is given:\n");
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

/// The job script sbatch is given: the directive block of `script` as
/// written (sbatch reads it there), then code that writes the script,
/// unchanged, to a private temporary file, starts `monitor`, runs the file
/// with its own interpreter (its shebang) and the job's arguments, forwards
/// TERM, INT and HUP to it, and on every exit path (an `exec` or a trap of
/// the script's own included) stops the monitor, runs `finalize` and exits
/// with the script's status.
/// The script's bytes are kept as they are (a Latin-1 comment included).
pub fn wrapper(script: &[u8], block_end: usize, monitor: &str, finalize: &str) -> Result<Vec<u8>> {
    let lines: Vec<&[u8]> = script.split(|b| *b == b'\n').collect();
    if !lines.first().is_some_and(|l| l.starts_with(b"#!")) {
        return Err(Error::Other(
            "not a batch script: its first line must start with #! (sbatch refuses it too)".into(),
        ));
    }
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
    let (mon, fin) = (sh_quote(monitor), sh_quote(finalize));
    w.extend_from_slice(format!("# hpc submit: the script runs unchanged, with its own interpreter, under\n# the monitor; it is finalized on every exit path, keeping its exit status.\nhpc_script=$(mktemp \"${{TMPDIR:-/tmp}}/hpc-job.XXXXXX\") || exit 1\ncat >\"$hpc_script\" <<'{delim}'\n").as_bytes());
    w.extend_from_slice(script);
    if !script.ends_with(b"\n") {
        w.push(b'\n');
    }
    w.extend_from_slice(
        format!(
            r#"{delim}
chmod 700 "$hpc_script"
hpc_monitored=0
if {mon} start; then
    hpc_monitored=1
else
    echo "hpc: the monitor did not start; the job runs unmonitored" >&2
fi
"$hpc_script" "$@" &
hpc_pid=$!
trap 'kill -TERM "$hpc_pid" 2>/dev/null' TERM
trap 'kill -INT "$hpc_pid" 2>/dev/null' INT
trap 'kill -HUP "$hpc_pid" 2>/dev/null' HUP
while :; do
    wait "$hpc_pid"
    hpc_rc=$?
    kill -0 "$hpc_pid" 2>/dev/null || break
done
trap - TERM INT HUP
if [ "$hpc_monitored" = 1 ]; then
    {mon} stop || :
    {fin} "$SLURM_JOB_ID" || echo "hpc: hpc-finalize $SLURM_JOB_ID failed" >&2
fi
rm -f "$hpc_script"
exit "$hpc_rc"
"#
        )
        .as_bytes(),
    );
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
    let d = Directives::read(&text)
        .map_err(|e| Error::Other(format!("{shown}: line {}: {}", e.line, e.reason)))?
        .with_cli(&args.sbatch)?;
    let table = ToolTable::builtin();
    let mut analysis = crate::analyze::analyze_bytes(path, bytes.clone(), &table)?;
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
            &wrapper(&bytes, d.block_end, &args.monitor, &args.finalize)?,
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
        _ => write!(out, "{}", diff_text(&plan))?,
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
        // History: 200 GiB in all, 16 CPUs in all.
        let (c, _) = plan_of(s, &[], rec(Some(204800.0), Some(16), None, Tier::History));
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

    #[test]
    fn memory_per_cpu_stays_per_cpu() {
        let s = "#!/bin/sh\n#SBATCH --mem-per-cpu=4G -n 4\nx\n";
        let (c, _) = plan_of(s, &[], rec(Some(8192.0), Some(4), None, Tier::History));
        assert_eq!(c[0].to, "--mem-per-cpu=2G");
    }

    #[test]
    fn the_wrapper_keeps_the_block_and_embeds_the_script_unchanged() {
        let s =
            "#!/bin/tcsh\n  # indented comment\n#SBATCH -p debug\n\necho hi\n#SBATCH --mem=1G\n";
        let d = Directives::read(s).unwrap();
        let w =
            String::from_utf8(wrapper(s.as_bytes(), d.block_end, "/m on", "/f").unwrap()).unwrap();
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
        assert!(wrapper(b"echo no shebang\n", 0, "m", "f").is_err());
        // Bytes that are not UTF-8 are kept.
        let latin1 = b"#!/bin/sh\n# caf\xe9\necho\n";
        let w = wrapper(latin1, 2, "m", "f").unwrap();
        assert!(w.windows(latin1.len()).any(|x| x == latin1));
    }
}
