//! The records hpc-model reads: a history (what `hpc-store dump --kind job
//! --kind summary --kind analysis` prints) and the `analysis` record of the
//! script to size. All record input of the crate goes through this module.
//!
//! A job is tied to its tool by an `analysis` record with its `job_id`, and
//! to the probe's measurements by its job-wide `summary`. Other kinds are
//! skipped; a line that is not a record, or a record of a known kind that
//! does not parse, is rejected with its line number.

use std::collections::HashMap;

use hpc_core::advice::{Analysis, Rec};
use hpc_core::input::Input;
use hpc_core::ndjson::Rejects;
use hpc_core::record::{from_line, peek_kind, Job, Summary};
use hpc_core::{Error, Result};

use crate::risk::Point;

/// The largest memory figure a job record is believed for, MiB (1 PiB).
pub const MOST_MB: f64 = 1024.0 * 1024.0 * 1024.0;
/// The longest time a job record is believed for, seconds (ten years).
pub const MOST_S: f64 = 10.0 * 365.0 * 86400.0;

/// One earlier job, as far as the sizing needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Past {
    /// The job id.
    pub job_id: String,
    /// The user.
    pub user: Option<String>,
    /// The tool, from the job's `analysis` record.
    pub tool: Option<String>,
    /// The SHA-256 of the job's script, from its `analysis` record.
    pub script_sha256: Option<String>,
    /// The job name.
    pub job_name: Option<String>,
    /// The normalised state.
    pub state: String,
    /// End time (RFC 3339), the order of the history.
    pub end: Option<String>,
    /// Peak memory of one node, MiB (the unit of `--mem`): the larger of
    /// sacct's MaxRSS (the largest single task's peak) times the tasks on a
    /// node, and the probe's largest per-node peak.
    pub peak_mb: Option<f64>,
    /// Where `peak_mb` came from.
    pub peak_from: PeakFrom,
    /// Requested memory of one node, MiB (sacct's request over the nodes).
    pub req_mem_mb: Option<f64>,
    /// Wall time, seconds.
    pub elapsed_s: Option<f64>,
    /// The time limit, seconds.
    pub timelimit_s: Option<f64>,
    /// Cores actually used: the probe's mean busy cores, else
    /// `total_cpu_s / elapsed_s`.
    pub cores: Option<f64>,
    /// Allocated CPUs.
    pub alloc_cpus: Option<u32>,
    /// CPU seconds used.
    pub cpu_s: Option<f64>,
    /// Input size, MiB, from the job's `analysis` record.
    pub input_mb: Option<f64>,
    /// GPUs actually used: see [`gpus_used`].
    pub gpus_used: Option<u32>,
}

/// Where a job's per-node peak came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PeakFrom {
    /// No peak.
    #[default]
    None,
    /// The probe's peak on its busiest node.
    Probe,
    /// sacct's MaxRSS (one task's) times this many tasks on a node.
    Tasks(u32),
}

/// The probe's peak on the job's busiest node: the largest of the job-wide
/// summary's `peak_rss_mb_by_node`, else its job-wide peak over `nodes`.
fn probe_node_peak(s: &Summary, nodes: u32) -> Option<f64> {
    let by_node = s
        .extra
        .get("peak_rss_mb_by_node")
        .and_then(|m| m.as_object())
        .and_then(|m| {
            m.values()
                .filter_map(serde_json::Value::as_f64)
                .reduce(f64::max)
        });
    by_node.or(s.peak_rss_mb.map(|p| p / f64::from(nodes)))
}

/// The GPUs a job used: those of its summary's `gpus` (hpc-merge) that
/// ran a process of the job or reached 1 % utilisation; else, from sacct,
/// none when no GPU memory was ever used, all it had when some was.
pub fn gpus_used(j: &Job, s: Option<&Summary>) -> Option<u32> {
    if let Some(list) = s.and_then(|s| s.extra.get("gpus")?.as_array().cloned()) {
        let used = |g: &serde_json::Value| {
            g["max_procs"].as_u64().is_some_and(|p| p > 0)
                || g["peak_util"].as_f64().is_some_and(|u| u >= 1.0)
        };
        return u32::try_from(list.iter().filter(|g| used(g)).count()).ok();
    }
    let mem = j.gpu_mem_max_mb?;
    Some(if mem > 0.0 { j.alloc_gpus? } else { 0 })
}

impl Past {
    /// The group the job is sized with: its user and its tool (the job
    /// name when no analysis names the tool), `user|tool`.
    pub fn group(&self) -> String {
        format!(
            "{}|{}",
            self.user.as_deref().unwrap_or(""),
            self.tool
                .as_deref()
                .or(self.job_name.as_deref())
                .unwrap_or("")
        )
    }

    /// The memory the job needed: its peak when it completed (or ran out of
    /// time), censored at its limit when it was killed for memory; `None`
    /// for other ends (failed, cancelled), whose peak says little.
    pub fn mem_point(&self) -> Option<Point> {
        // A positive figure below 1 PiB; anything else is no reading (a
        // limit of 0, a corrupt record).
        let ok = |v: &f64| *v > 0.0 && *v <= MOST_MB;
        match self.state.as_str() {
            "COMPLETED" | "TIMEOUT" => self.peak_mb.filter(ok).map(Point::seen),
            "OUT_OF_MEMORY" => {
                let at = self.req_mem_mb.filter(ok).or(self.peak_mb.filter(ok))?;
                Some(Point {
                    value: at,
                    censored: true,
                })
            }
            _ => None,
        }
    }

    /// The memory-time the job used, MiB x seconds: its peak times its
    /// elapsed time when its peak is observed (not censored).
    pub fn mem_cost(&self) -> Option<f64> {
        let peak = self.mem_point().filter(|p| !p.censored)?.value;
        self.elapsed_s.filter(|t| *t > 0.0).map(|t| peak * t)
    }

    /// The time the job needed: its elapsed time when it completed,
    /// censored at its limit (or elapsed, if larger) when it timed out.
    pub fn time_point(&self) -> Option<Point> {
        let ok = |v: &f64| *v > 0.0 && *v <= MOST_S;
        let elapsed = self.elapsed_s.filter(ok);
        match self.state.as_str() {
            "COMPLETED" => elapsed.map(Point::seen),
            "TIMEOUT" => {
                let at = match (elapsed, self.timelimit_s.filter(ok)) {
                    (Some(e), Some(l)) => e.max(l),
                    (e, l) => e.or(l)?,
                };
                Some(Point {
                    value: at,
                    censored: true,
                })
            }
            _ => None,
        }
    }
}

/// A history read from records, in end-time order (jobs still running, with
/// no end, come last).
#[derive(Debug, Default)]
pub struct History {
    /// The jobs.
    pub jobs: Vec<Past>,
    /// Lines read.
    pub lines: u64,
}

/// What one line of a history contributes.
pub enum Item {
    /// A `job` record.
    Job(Job),
    /// A `summary` record.
    Summary(Summary),
    /// An `analysis` record.
    Analysis(Analysis),
    /// A `rec` record.
    Rec(Rec),
    /// Any other kind.
    Other,
}

fn parse_item(text: &str) -> std::result::Result<Item, String> {
    let kind = peek_kind(text).ok_or("not a JSON record with a kind")?;
    Ok(match kind.as_str() {
        "job" => Item::Job(from_line(text)?),
        "summary" => Item::Summary(from_line(text)?),
        "analysis" => Item::Analysis(from_line(text)?),
        "rec" => Item::Rec(from_line(text)?),
        _ => Item::Other,
    })
}

/// Calls `each` with every parsed line of `input`; unreadable or malformed
/// lines go to `rejects` (a cut last record is only warned about).
fn for_each_item(
    input: Input<'_>,
    rejects: &mut Rejects,
    mut each: impl FnMut(Item),
) -> Result<u64> {
    input.for_each_line(rejects, |rejects, line| match parse_item(line.text) {
        Ok(item) => {
            each(item);
            Ok(())
        }
        Err(why) => line.bad_record(rejects, &why),
    })
}

/// Reads a history: job records joined with their job-wide summaries and
/// analyses by `job_id`.
pub fn read_history(input: Input<'_>, rejects: &mut Rejects) -> Result<History> {
    let mut jobs = Vec::new();
    let mut summaries: HashMap<String, Summary> = HashMap::new();
    let mut analyses: HashMap<String, Analysis> = HashMap::new();
    let lines = for_each_item(input, rejects, |item| match item {
        Item::Job(j) => jobs.push(j),
        Item::Summary(s) if s.host.is_none() => {
            summaries.insert(s.job_id.clone(), s);
        }
        Item::Analysis(a) => {
            if let Some(id) = a.job_id.clone() {
                analyses.insert(id, a);
            }
        }
        _ => {}
    })?;
    let mut jobs: Vec<Past> = jobs
        .into_iter()
        .map(|j| {
            let s = summaries.get(&j.job_id);
            // An array's analysis is keyed by the array's id.
            let a = analyses
                .get(&j.job_id)
                .or_else(|| analyses.get(hpc_core::slurm::parent_job_id(&j.job_id)));
            past_of(j, s, a)
        })
        .collect();
    // End-time order, jobs with no end last.
    jobs.sort_by(|a, b| (a.end.is_none(), &a.end).cmp(&(b.end.is_none(), &b.end)));
    Ok(History { jobs, lines })
}

fn past_of(j: Job, s: Option<&Summary>, a: Option<&Analysis>) -> Past {
    let gpus_used = gpus_used(&j, s);
    let nodes = j.nnodes.unwrap_or(1).max(1);
    let tasks = j.ntasks.map_or(1, |t| t.div_ceil(nodes)).max(1);
    // The probe's per-node peak when there is one (never below one task's
    // peak); else one task's peak times the tasks on a node, which holds
    // even if they all peak at once.
    let (peak_mb, peak_from) = match (j.max_rss_mb, s.and_then(|s| probe_node_peak(s, nodes))) {
        (task, Some(node)) => (Some(node.max(task.unwrap_or(0.0))), PeakFrom::Probe),
        (Some(task), None) => (Some(task * f64::from(tasks)), PeakFrom::Tasks(tasks)),
        (None, None) => (None, PeakFrom::None),
    };
    let from_acct = match (j.total_cpu_s, j.elapsed_s) {
        (Some(c), Some(e)) if e > 0.0 => Some(c / e),
        _ => None,
    };
    Past {
        cores: s.and_then(|s| s.mean_cpu_cores).or(from_acct),
        tool: a.map(|a| a.tool.clone()),
        script_sha256: a.map(|a| a.script_sha256.clone()).filter(|h| !h.is_empty()),
        input_mb: a.and_then(|a| a.input_mb),
        job_id: j.job_id,
        user: j.user,
        job_name: j.job_name,
        state: j.state,
        end: j.end,
        peak_mb,
        peak_from,
        req_mem_mb: j.req_mem_mb.map(|m| m / f64::from(nodes)),
        elapsed_s: j.elapsed_s,
        timelimit_s: j.timelimit_s,
        alloc_cpus: j.alloc_cpus,
        cpu_s: j.total_cpu_s,
        gpus_used,
    }
}

/// Reads the first `analysis` record of `input` (the script to size, as
/// `hpc-model analyze` prints it).
pub fn read_analysis(input: Input<'_>) -> Result<Analysis> {
    read_first(input, "analysis", |item| match item {
        Item::Analysis(a) => Some(a),
        _ => None,
    })
}

/// The first record of `input` that `pick` takes. A bad line before it
/// is an error naming the line (not skipped: what is read here is the
/// one record a command works from); none is an error naming `what`.
pub fn read_first<T>(
    input: Input<'_>,
    what: &str,
    mut pick: impl FnMut(Item) -> Option<T>,
) -> Result<T> {
    let mut rejects = Rejects::new("hpc-model");
    rejects.strict = true;
    let mut found = None;
    let shown = input.shown();
    for_each_item(input, &mut rejects, |item| {
        if found.is_none() {
            found = pick(item);
        }
    })?;
    found.ok_or_else(|| Error::Other(format!("{shown}: no {what} record")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = concat!(
        r#"{"kind":"job","cluster":"c","job_id":"2","job_id_raw":"2","state":"OUT_OF_MEMORY","end":"2026-01-02T00:00:00Z","req_mem_mb":4096,"max_rss_mb":4000,"is_final":true}"#,
        "\n",
        "not json\n",
        r#"{"kind":"job","cluster":"c","job_id":"1","job_id_raw":"1","state":"COMPLETED","end":"2026-01-01T00:00:00Z","elapsed_s":100,"total_cpu_s":250,"max_rss_mb":900,"is_final":true}"#,
        "\n",
        r#"{"kind":"summary","job_id":"1","peak_rss_mb":1000,"mean_cpu_cores":3.0}"#,
        "\n",
        r#"{"kind":"analysis","job_id":"1","script":"a.sh","script_sha256":"x","request":{},"tool":"star","input_mb":50}"#,
        "\n",
        r#"{"kind":"flag","job_id":"1"}"#,
        "\n",
        r#"{"kind":"job","cluster":"c""#,
    );

    #[test]
    fn joins_summaries_and_analyses_and_reports_bad_lines() {
        let mut rej = Rejects::new("t");
        let h = read_history(Input::new("-", LINES.as_bytes()), &mut rej).unwrap();
        assert_eq!(rej.rejected, 1, "line 2 only; the truncated last is warned");
        assert_eq!(h.jobs.len(), 2);
        let first = &h.jobs[0];
        assert_eq!(first.job_id, "1", "end-time order");
        assert_eq!(first.peak_mb, Some(1000.0));
        assert_eq!(first.cores, Some(3.0));
        assert_eq!(first.tool.as_deref(), Some("star"));
        assert_eq!(first.input_mb, Some(50.0));
        let oom = h.jobs[1].mem_point().unwrap();
        assert!(oom.censored);
        assert_eq!(oom.value, 4096.0, "censored at its limit, not its peak");
    }

    #[test]
    fn a_timeout_is_censored_for_time_at_its_limit() {
        let p = Past {
            state: "TIMEOUT".into(),
            elapsed_s: Some(3590.0),
            timelimit_s: Some(3600.0),
            peak_mb: Some(10.0),
            ..Default::default()
        };
        let t = p.time_point().unwrap();
        assert!(t.censored);
        assert_eq!(t.value, 3600.0);
        assert!(!p.mem_point().unwrap().censored);
    }

    #[test]
    fn an_absurd_or_zero_figure_is_no_reading() {
        // A limit of 1.5e308 MiB was advised as --mem=infM; a limit of 0
        // dropped a job that ran out whose peak was known.
        let oom = |req: f64, peak: Option<f64>| Past {
            state: "OUT_OF_MEMORY".into(),
            req_mem_mb: Some(req),
            peak_mb: peak,
            ..Default::default()
        };
        assert_eq!(oom(1.5e308, None).mem_point(), None);
        assert_eq!(
            oom(1.5e308, Some(3000.0)).mem_point().unwrap().value,
            3000.0
        );
        assert_eq!(oom(0.0, Some(3000.0)).mem_point().unwrap().value, 3000.0);
        let done = Past {
            state: "COMPLETED".into(),
            peak_mb: Some(f64::INFINITY),
            elapsed_s: Some(1e12),
            ..Default::default()
        };
        assert_eq!(done.mem_point(), None);
        assert_eq!(done.time_point(), None);
    }
}
