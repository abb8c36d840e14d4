//! hpc-flags: anomaly detection over a stream of hpc-sizer records.
//!
//! Every input line is passed through unchanged, except a job-wide
//! `summary`, which comes out at the end of its job with `not_evaluated`
//! added. After each job's records, one `flag` record is written for each
//! raised flag (see [`rules::RULES`] for the flags and
//! [`thresholds::Param`] for the thresholds).
//!
//! Records are grouped by `job_id`: a job ends where the next job's first
//! record starts, and at the end of the input, so memory holds one job at a
//! time (its job-wide sample series at most).

pub mod eval;
pub mod rules;
pub mod thresholds;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;

use argh::FromArgs;
use hpc_core::fields::index_of;
use hpc_core::input::{for_each_line, Inputs, Line};
use hpc_core::ndjson::Rejects;
use hpc_core::num::sum_present;
use hpc_core::paths::shown;
use hpc_core::record::{write_tagged, Sample};
use hpc_core::{Error, Result};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::eval::{evaluate, JobAcc, JobFacts, Point, SummaryFacts};
use crate::thresholds::Thresholds;

/// Raise anomaly flags for the jobs in a stream of hpc-sizer records.
#[derive(FromArgs, Debug)]
#[argh(
    example = "hpc-merge spool/42/*.ndjson | hpc-flags | hpc-store put",
    example = "hpc-store dump --kind job | hpc-flags --set mem_overrequest=0.3 | hpc-store put",
    example = "hpc-flags --config flags.conf job42.ndjson | grep '\"kind\":\"flag\"'",
    note = "Exit status: 0 ok, 1 bad data or failure, 2 usage error. Thresholds: see hpc-flags(1)."
)]
pub struct Args {
    /// override a threshold, name=value (repeatable)
    #[argh(option)]
    pub set: Vec<String>,
    /// read thresholds from a file of `name = value` lines (# comments)
    #[argh(option)]
    pub config: Option<String>,
    /// list the thresholds and their values, then exit
    #[argh(switch)]
    pub list_thresholds: bool,
    /// job-wide summaries for the jobs whose own records have none (what
    /// hpc-store dump --kind summary prints): the reflag of stored jobs
    #[argh(option)]
    pub summaries: Option<String>,
    /// input files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// The checked options.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    /// The thresholds in force.
    pub thresholds: Thresholds,
    /// Print the thresholds instead of reading input.
    pub list_thresholds: bool,
    /// Input files; empty means stdin.
    pub inputs: Vec<String>,
    /// A file of job-wide summaries for jobs without one of their own.
    pub summaries: Option<String>,
}

impl Opts {
    /// Checks `args`: the config file first, then each `--set`.
    pub fn from_args(args: Args) -> Result<Opts> {
        let mut th = Thresholds::default();
        if let Some(path) = &args.config {
            // A config file that cannot be read or has a bad line is a usage
            // error (exit 2), named with its line, like a bad --set.
            let source = format!("--config {}", shown(Path::new(path)));
            let bytes = std::fs::read(path).map_err(|e| Error::Usage(format!("{source}: {e}")))?;
            th.apply_config(&source, &bytes)?;
        }
        for s in &args.set {
            th.set_pair(s)?;
        }
        Ok(Opts {
            thresholds: th,
            list_thresholds: args.list_thresholds,
            inputs: args.inputs,
            summaries: args.summaries,
        })
    }
}

/// What a run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Lines read.
    pub lines: u64,
    /// Lines rejected.
    pub rejected: u64,
    /// Jobs evaluated.
    pub jobs: u64,
    /// Flags raised.
    pub flags: u64,
}

fn job_id_de<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// A field of hpc-core's sample table, checked at compile time (an
/// unknown name stops the build).
const fn sample_field(name: &str) -> &str {
    Sample::FIELDS[index_of(Sample::FIELDS, name)].name
}

/// Declares [`LineView`] with the sample fields the rules read, each
/// checked against hpc-core's sample table.
macro_rules! line_view {
    ($($sample:ident),* $(,)?) => {
        /// The parts of a line that decide where it goes.
        #[derive(Deserialize, Default)]
        struct LineView<'a> {
            #[serde(borrow, default)]
            kind: Option<Cow<'a, str>>,
            #[serde(default, deserialize_with = "job_id_de")]
            job_id: Option<String>,
            /// On `job` records: the raw id, which is what the probe's files and
            /// the store key a job by (an array task `14_3` has raw id `14`).
            #[serde(default, deserialize_with = "job_id_de")]
            job_id_raw: Option<String>,
            #[serde(borrow, default)]
            host: Option<Cow<'a, str>>,
            $(
                #[serde(default)]
                $sample: Option<f64>,
            )*
            /// On `meta` records.
            #[serde(default)]
            req_cpus: Option<f64>,
            #[serde(default)]
            req_mem_mb: Option<f64>,
        }

        const _: () = {
            $(sample_field(stringify!($sample));)*
        };
    };
}

line_view! {
    t,
    cpu_frac,
    cpu_cores,
    rss_mb,
    read_mbps,
    write_mbps,
    lustre_read_mbps,
    lustre_write_mbps,
    lustre_meta_ops,
    cpi,
    cache_miss_rate,
    numa_miss_rate,
    gpu_util,
    gpu_mem_mb,
    gpu_mem_total_mb,
}

impl LineView<'_> {
    /// Only the kind and job id of a record whose other fields do not fit.
    fn bare(m: &Map<String, Value>) -> Self {
        LineView {
            kind: m
                .get("kind")
                .and_then(Value::as_str)
                .map(|k| Cow::Owned(format!("{k}#unread"))),
            job_id: match m.get("job_id") {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            },
            ..LineView::default()
        }
    }
}

fn nan(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::NAN)
}

/// One job being read.
#[derive(Default)]
struct Group {
    job_id: Option<String>,
    acc: JobAcc,
    summary: Option<Map<String, Value>>,
}

struct Flagger<'a, W: Write> {
    th: &'a Thresholds,
    out: W,
    group: Group,
    stats: Stats,
    /// `--summaries`: job id to its job-wide summary.
    summaries: HashMap<String, SummaryFacts>,
}

impl<W: Write> Flagger<'_, W> {
    /// Ends the current job: its summary (with `not_evaluated`) and flags.
    fn flush(&mut self) -> Result<()> {
        let g = std::mem::take(&mut self.group);
        let Some(job_id) = g.job_id else {
            return Ok(());
        };
        let mut acc = g.acc;
        if acc.summary.is_none() {
            acc.summary = self.summaries.remove(&job_id);
        }
        let outcome = evaluate(&job_id, acc, self.th);
        self.stats.jobs += 1;
        let ne: Vec<Value> = outcome
            .not_evaluated
            .iter()
            .map(|s| Value::from(s.as_str()))
            .collect();
        match g.summary {
            Some(mut m) => {
                m.remove("kind");
                m.insert("not_evaluated".into(), Value::Array(ne));
                write_tagged(&mut self.out, "summary", &m)?;
            }
            None if !ne.is_empty() => {
                let mut m = Map::new();
                m.insert("job_id".into(), job_id.clone().into());
                m.insert("not_evaluated".into(), Value::Array(ne));
                write_tagged(&mut self.out, "summary", &m)?;
            }
            None => {}
        }
        for f in &outcome.flags {
            write_tagged(&mut self.out, "flag", f)?;
            self.stats.flags += 1;
        }
        Ok(())
    }

    /// Handles one parsed line; returns whether to pass it through.
    fn line(&mut self, text: &str, v: LineView) -> Result<bool> {
        let key = match v.kind.as_deref() {
            Some("job") => v.job_id_raw.as_ref().or(v.job_id.as_ref()),
            _ => v.job_id.as_ref(),
        };
        if let Some(id) = key {
            match &self.group.job_id {
                Some(cur) if cur == id => {}
                None => self.group.job_id = Some(id.clone()),
                Some(_) => {
                    self.flush()?;
                    self.group.job_id = Some(id.clone());
                }
            }
        }
        let acc = &mut self.group.acc;
        match v.kind.as_deref() {
            Some("sample") => {
                let Some(t) = v.t else { return Ok(true) };
                let p = Point {
                    t,
                    frac: nan(v.cpu_frac),
                    cores: nan(v.cpu_cores),
                    rss: nan(v.rss_mb),
                    io: sum_present(nan(v.read_mbps), nan(v.write_mbps)),
                    lustre_io: sum_present(nan(v.lustre_read_mbps), nan(v.lustre_write_mbps)),
                    lustre_meta: nan(v.lustre_meta_ops),
                    cpi: nan(v.cpi),
                    cache: nan(v.cache_miss_rate),
                    numa: nan(v.numa_miss_rate),
                    gpu_util: nan(v.gpu_util),
                    gpu_mem: nan(v.gpu_mem_mb),
                    gpu_mem_total: nan(v.gpu_mem_total_mb),
                };
                acc.add_sample(v.host.as_deref(), p);
            }
            Some("job") => {
                acc.job = serde_json::from_str::<JobFacts>(text).ok();
            }
            Some("meta") => acc.add_meta(v.req_cpus, v.req_mem_mb),
            Some("summary")
                if v.host.is_none() && self.group.summary.is_none() && v.job_id.is_some() =>
            {
                acc.summary = serde_json::from_str::<SummaryFacts>(text).ok();
                self.group.summary = serde_json::from_str::<Map<String, Value>>(text).ok();
                return Ok(self.group.summary.is_none());
            }
            _ => {}
        }
        Ok(true)
    }
}

/// The job-wide summaries of `--summaries` by job id (the first of each
/// job); a line that is not a summary record is rejected by its line.
fn read_summaries(path: &str, rejects: &mut Rejects) -> Result<HashMap<String, SummaryFacts>> {
    let mut map = HashMap::new();
    let inputs = Inputs::new(vec![path.to_string()])?;
    for_each_line(&inputs, std::io::empty(), rejects, |rejects, line| {
        let Some(v) = view_of(&line, rejects)? else {
            return Ok(());
        };
        match v.kind.as_deref() {
            Some("summary") => {
                if let (None, Some(id)) = (&v.host, v.job_id) {
                    if let Ok(s) = serde_json::from_str::<SummaryFacts>(line.text.trim()) {
                        map.entry(id).or_insert(s);
                    }
                }
            }
            kind => line.reject(
                rejects,
                &format!("a {} record, not a summary", kind.unwrap_or("?")),
            )?,
        }
        Ok(())
    })?;
    Ok(map)
}

/// Parses the parts of `line` that route it. A line that is not a record
/// is rejected, a cut last record warned about: `None`, it is dropped.
fn view_of<'t>(line: &Line<'t>, rejects: &mut Rejects) -> Result<Option<LineView<'t>>> {
    let text = line.text.trim();
    let view: LineView = match serde_json::from_str(text) {
        Ok(v) => v,
        // Valid JSON with an unexpected type in a field the rules
        // read: pass it through, its values unused.
        Err(e) if e.is_data() => match serde_json::from_str::<Map<String, Value>>(text) {
            Ok(m) => LineView::bare(&m),
            Err(e) => {
                line.reject(rejects, &format!("not a record: {e}"))?;
                return Ok(None);
            }
        },
        Err(e) => {
            line.bad_record(rejects, &format!("not a record: {e}"))?;
            return Ok(None);
        }
    };
    if view.kind.is_none() {
        line.reject(rejects, "no \"kind\"")?;
        return Ok(None);
    }
    Ok(Some(view))
}

/// Writes every threshold with its value and meaning.
fn list_thresholds(th: &Thresholds, out: &mut impl Write) -> Result<()> {
    for p in thresholds::Param::ALL {
        let (name, what) = (p.name(), p.doc());
        writeln!(out, "{name} = {} # {what}", th.get(*p))?;
    }
    Ok(())
}

/// Reads records from `opts.inputs` (or `stdin`), passes them to `out` and
/// adds each job's flags after its records.
pub fn run(opts: &Opts, stdin: impl BufRead, out: impl Write) -> Result<Stats> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    if opts.list_thresholds {
        list_thresholds(&opts.thresholds, &mut out)?;
        out.flush()?;
        return Ok(Stats::default());
    }
    let mut rejects = Rejects::new("hpc-flags");
    let summaries = match &opts.summaries {
        Some(path) => read_summaries(path, &mut rejects)?,
        None => HashMap::new(),
    };
    let mut f = Flagger {
        th: &opts.thresholds,
        out: &mut out,
        group: Group::default(),
        stats: Stats::default(),
        summaries,
    };
    let inputs = Inputs::new(opts.inputs.clone())?;
    f.stats.lines = for_each_line(&inputs, stdin, &mut rejects, |rejects, line| {
        let Some(view) = view_of(&line, rejects)? else {
            return Ok(());
        };
        let text = line.text.trim();
        if f.line(text, view)? {
            f.out.write_all(text.as_bytes())?;
            f.out.write_all(b"\n")?;
        }
        Ok(())
    })?;
    f.flush()?;
    let mut stats = f.stats;
    out.flush()?;
    stats.rejected = rejects.rejected;
    rejects.finish(stats.lines)?;
    Ok(stats)
}

/// The whole tool: checked arguments, stdin, stdout.
pub fn main_with(args: Args) -> Result<Stats> {
    let opts = Opts::from_args(args)?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    run(&opts, stdin.lock(), stdout.lock())
}
