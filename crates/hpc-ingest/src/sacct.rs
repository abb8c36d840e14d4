//! sacct `--parsable2` text to job records: column mapping, step merging,
//! and the derived efficiencies.

use hpc_core::record::Job;
use hpc_core::slurm::{self, Limit};

pub use hpc_core::slurm::SACCT_FIELDS;

/// How many of [`SACCT_FIELDS`] there were before the GPU usage columns:
/// a headerless input with that many columns has the older list.
const FIELDS_BEFORE_GPU: usize = 24;

/// The columns hpc-ingest reads; any other column is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Cluster,
    JobId,
    JobIdRaw,
    User,
    Group,
    Account,
    Partition,
    JobName,
    State,
    ExitCode,
    Submit,
    Start,
    End,
    Elapsed,
    ElapsedRaw,
    Timelimit,
    AllocCpus,
    AllocTres,
    NNodes,
    NTasks,
    NodeList,
    ReqMem,
    MaxRss,
    TotalCpu,
    TresUsageInMax,
    TresUsageInAve,
}

const NCOLS: usize = 26;

fn col_of(name: &str) -> Option<Col> {
    let c = match name.trim_ascii().to_ascii_lowercase().as_str() {
        "cluster" => Col::Cluster,
        "jobid" => Col::JobId,
        "jobidraw" => Col::JobIdRaw,
        "user" => Col::User,
        "group" => Col::Group,
        "account" => Col::Account,
        "partition" => Col::Partition,
        "jobname" => Col::JobName,
        "state" => Col::State,
        "exitcode" => Col::ExitCode,
        "submit" => Col::Submit,
        "start" => Col::Start,
        "end" => Col::End,
        "elapsed" => Col::Elapsed,
        "elapsedraw" => Col::ElapsedRaw,
        "timelimit" => Col::Timelimit,
        "alloccpus" => Col::AllocCpus,
        "alloctres" => Col::AllocTres,
        "nnodes" => Col::NNodes,
        "ntasks" => Col::NTasks,
        "nodelist" => Col::NodeList,
        "reqmem" => Col::ReqMem,
        "maxrss" => Col::MaxRss,
        "totalcpu" => Col::TotalCpu,
        "tresusageinmax" => Col::TresUsageInMax,
        "tresusageinave" => Col::TresUsageInAve,
        _ => return None,
    };
    Some(c)
}

/// Where each known column sits in a line.
#[derive(Debug, Clone)]
pub struct Columns {
    pos: [Option<usize>; NCOLS],
    count: usize,
}

impl Columns {
    /// Maps a header (or `--fields`) list. `JobID` is required.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Columns, String> {
        let mut pos = [None; NCOLS];
        let mut count = 0;
        for (i, n) in names.into_iter().enumerate() {
            count += 1;
            if let Some(c) = col_of(n) {
                pos[c as usize] = Some(i);
            }
        }
        if pos[Col::JobId as usize].is_none() {
            return Err("no JobID column".into());
        }
        Ok(Columns { pos, count })
    }

    /// The columns of a headerless input of `count` fields: those of
    /// `--sacct-format`, or of its older list without the GPU usage.
    pub fn builtin(count: usize) -> Columns {
        let names = if count == FIELDS_BEFORE_GPU {
            &SACCT_FIELDS[..FIELDS_BEFORE_GPU]
        } else {
            SACCT_FIELDS
        };
        Columns::from_names(names.iter().copied()).expect("built-in fields have JobID")
    }

    /// True when a line looks like a header: one field is literally `JobID`
    /// (with known columns, only the JobID column is looked at), and, with
    /// none known yet, every field is a name (a letter first: a job id, a
    /// time or an empty value is data; `--parsable`'s trailing delimiter
    /// aside). A headerless first line of a job named `jobid` was taken for
    /// a header, and its job lost without a word.
    pub fn is_header(cols: Option<&Columns>, fields: &[&str]) -> bool {
        let is_jobid = |f: &&str| f.trim_ascii().eq_ignore_ascii_case("jobid");
        let named = |f: &&str| {
            f.trim_ascii()
                .starts_with(|c: char| c.is_ascii_alphabetic())
        };
        match cols {
            Some(c) if fields.len() == c.count => c.pos[Col::JobId as usize]
                .and_then(|i| fields.get(i))
                .is_some_and(is_jobid),
            Some(_) => fields.iter().any(is_jobid),
            None => {
                let names = match fields.split_last() {
                    Some((&"", rest)) if !rest.is_empty() => rest,
                    _ => fields,
                };
                names.iter().any(is_jobid) && names.iter().all(named)
            }
        }
    }

    /// The number of columns a line must have.
    pub fn count(&self) -> usize {
        self.count
    }
}

/// Options of the conversion.
#[derive(Debug, Clone)]
pub struct ParseOpts {
    /// The cluster name when the input has no `Cluster` column.
    pub cluster: String,
    /// The zone SLURM's local timestamps are read in.
    pub zone: slurm::Zone,
}

/// One input line split into its fields.
struct Fields<'s, 'a> {
    f: &'s [&'a str],
    cols: &'s Columns,
}

impl<'a> Fields<'_, 'a> {
    fn get(&self, c: Col) -> Option<&'a str> {
        self.cols.pos[c as usize].map(|i| self.f[i])
    }
    fn text(&self, c: Col) -> Option<String> {
        self.get(c)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }
}

/// A step's contribution to its job.
#[derive(Debug, Default, Clone)]
struct StepAcc {
    max_rss_mb: Option<f64>,
    used_mem_mb: Option<f64>,
    step_cpu_s: Option<f64>,
    steps: u32,
    max_ntasks: Option<u32>,
    gpu: GpuUse,
}

/// GPU use from `TRESUsageInMax`/`TRESUsageInAve` (SLURM 23.02+ with GPU
/// accounting): the largest over the job's lines.
#[derive(Debug, Default, Clone, Copy)]
pub struct GpuUse {
    /// `gres/gpumem` of TRESUsageInMax, MiB: one task's peak.
    mem_max_mb: Option<f64>,
    /// `gres/gpuutil` of TRESUsageInAve times the line's tasks: the
    /// utilisation summed over the GPUs, percent.
    util_sum: Option<f64>,
    /// The same times the line's elapsed seconds, summed over the lines:
    /// percent-seconds of GPU use.
    util_s: Option<f64>,
}

impl GpuUse {
    /// Reads a line's TRES usage columns; an error names the column.
    fn parse(
        fs: &Fields<'_, '_>,
        ntasks: Option<u32>,
        elapsed_s: Option<f64>,
    ) -> Result<GpuUse, String> {
        let get = |c: Col, name: &str, key: &str| match fs.get(c) {
            None => Ok(None),
            Some(s) => tres_usage(s, key).map_err(|e| bad(name, e)),
        };
        // SLURM writes NO_VAL64 or INFINITE64 where a GPU gave no reading.
        let no_value = |v: &&str| v.trim().parse::<u64>().is_ok_and(|n| n >= u64::MAX - 1);
        let mem = get(Col::TresUsageInMax, "TRESUsageInMax", "gres/gpumem")?;
        let util = get(Col::TresUsageInAve, "TRESUsageInAve", "gres/gpuutil")?;
        let (mem, util) = (mem.filter(|v| !no_value(v)), util.filter(|v| !no_value(v)));
        let mem_max_mb = match mem {
            None => None,
            Some(v) => slurm::parse_mem(v, 1.0)
                .map_err(|e| bad("TRESUsageInMax", format!("gres/gpumem: {e}")))?
                .map(|m| m.mb),
        };
        let util_sum = match util {
            None => None,
            Some(v) => Some(v.trim().parse::<f64>().map_err(|_| {
                bad(
                    "TRESUsageInAve",
                    format!("gres/gpuutil '{v}': not a number"),
                )
            })?),
        }
        .filter(|u| u.is_finite() && *u >= 0.0)
        .map(|u| u * f64::from(ntasks.unwrap_or(1).max(1)));
        Ok(GpuUse {
            mem_max_mb,
            util_sum,
            util_s: util_sum.zip(elapsed_s).map(|(u, e)| u * e),
        })
    }

    /// The largest peak and utilisation of two lines, their GPU use summed
    /// (steps).
    fn and(self, o: GpuUse) -> GpuUse {
        let sum = match (self.util_s, o.util_s) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        GpuUse {
            mem_max_mb: max_opt(self.mem_max_mb, o.mem_max_mb),
            util_sum: max_opt(self.util_sum, o.util_sum),
            util_s: sum,
        }
    }

    /// Puts `gpu_mem_max_mb` and `gpu_util` on the job: the steps' GPU use
    /// over the allocated GPUs' time (a 10-hour batch step at 0 % and a
    /// one-minute step at 100 % are 0.17 %, not 100 %), else, without the
    /// elapsed times, the largest line's utilisation per allocated GPU; at
    /// most 100.
    fn put(self, job: &mut Job) {
        job.gpu_mem_max_mb = self.mem_max_mb.map(|m| round(m, 4));
        let gpus = job.alloc_gpus.filter(|g| *g > 0).map(f64::from);
        let by_time = self
            .util_s
            .zip(job.elapsed_s.filter(|e| *e > 0.0))
            .zip(gpus)
            .map(|((s, e), g)| s / (g * e));
        let largest = self.util_sum.zip(gpus).map(|(u, g)| u / g);
        job.gpu_util = by_time.or(largest).map(|u| round(u.min(100.0), 4));
    }
}

/// The value of `key` in a TRES usage list such as
/// `cpu=00:00:10,energy=0,gres/gpumem=3000M,gres/gpuutil=85,mem=500M`;
/// `None` when the list has no such entry.
fn tres_usage<'a>(list: &'a str, key: &str) -> Result<Option<&'a str>, String> {
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(format!("'{entry}': not name=value"));
        };
        if k == key {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// A job being assembled from its job line and step lines.
#[derive(Debug)]
pub struct Pending {
    key: String,
    job: Job,
    req_mem: Option<slurm::Mem>,
    tres_mem_mb: Option<f64>,
    job_cpu_s: Option<f64>,
    job_gpu: GpuUse,
    acc: StepAcc,
}

/// What the merger noticed across the whole input.
#[derive(Debug, Default, Clone, Copy)]
pub struct Notes {
    /// Jobs with no step lines and a zero TotalCPU (as `sacct -X` prints):
    /// their CPU efficiency is left empty.
    pub no_step_cpu: u64,
}

fn bad(field: &str, reason: String) -> String {
    format!("{field} {reason}")
}

fn u32_field(fs: &Fields<'_, '_>, c: Col, name: &str) -> Result<Option<u32>, String> {
    match fs.get(c) {
        None => Ok(None),
        Some(s) => match slurm::parse_count(s).map_err(|e| bad(name, e))? {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| bad(name, format!("'{s}': too large"))),
        },
    }
}

fn timestamp(
    fs: &Fields<'_, '_>,
    c: Col,
    name: &str,
    zone: &slurm::Zone,
) -> Result<Option<String>, String> {
    match fs.get(c) {
        None => Ok(None),
        Some(s) => Ok(zone
            .parse(s)
            .map_err(|e| bad(name, e))?
            .map(|t| t.to_rfc3339())),
    }
}

fn duration(fs: &Fields<'_, '_>, c: Col, name: &str) -> Result<Option<f64>, String> {
    match fs.get(c) {
        None => Ok(None),
        Some(s) => slurm::parse_duration(s).map_err(|e| bad(name, e)),
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Splits a line on the delimiter into `buf` (reused between lines).
pub fn split_line<'a>(line: &'a str, delim: &str, buf: &mut Vec<&'a str>) {
    buf.clear();
    if let [d] = delim.as_bytes() {
        // The common single-byte case: memchr finds the delimiters faster
        // than `str::split`.
        let mut start = 0;
        for i in memchr::memchr_iter(*d, line.as_bytes()) {
            buf.push(&line[start..i]);
            start = i + 1;
        }
        buf.push(&line[start..]);
    } else {
        buf.extend(line.split(delim));
    }
}

/// Turns a job line into a pending job, or a step line into a contribution
/// to the current one.
pub enum Parsed<'a> {
    /// A job line: a new job starts.
    Job(Box<Pending>),
    /// A step line of the job with this key.
    Step(&'a str, StepLine),
}

/// What a step line contributes.
#[derive(Debug)]
pub struct StepLine {
    max_rss_mb: Option<f64>,
    ntasks: Option<u32>,
    cpu_s: Option<f64>,
    gpu: GpuUse,
}

/// Parses one split line.
pub fn parse_line<'a>(
    fields: &[&'a str],
    cols: &Columns,
    opts: &ParseOpts,
) -> Result<Parsed<'a>, String> {
    let fs = Fields { f: fields, cols };
    let id_text = fs.get(Col::JobId).unwrap_or("");
    let id = slurm::parse_job_id(id_text).map_err(|e| bad("JobID", e))?;
    let ntasks = u32_field(&fs, Col::NTasks, "NTasks")?;
    let max_rss = match fs.get(Col::MaxRss) {
        None => None,
        Some(s) => slurm::parse_mem(s, 1.0)
            .map_err(|e| bad("MaxRSS", e))?
            .map(|m| m.mb),
    };
    let cpu_s = duration(&fs, Col::TotalCpu, "TotalCPU")?;
    let elapsed_s = match fs.get(Col::ElapsedRaw).map(str::trim) {
        Some(s) if !s.is_empty() => slurm::parse_count(s)
            .map_err(|e| bad("ElapsedRaw", e))?
            .map(|v| v as f64),
        _ => duration(&fs, Col::Elapsed, "Elapsed")?,
    };
    let gpu = GpuUse::parse(&fs, ntasks, elapsed_s)?;
    if id.step.is_some() {
        return Ok(Parsed::Step(
            id.job,
            StepLine {
                max_rss_mb: max_rss,
                ntasks,
                cpu_s,
                gpu,
            },
        ));
    }
    let (state, cancelled_by) =
        slurm::parse_state(fs.get(Col::State).unwrap_or("")).map_err(|e| bad("State", e))?;
    let raw = match fs.get(Col::JobIdRaw).map(str::trim) {
        Some(r) if !r.is_empty() => {
            slurm::parse_job_id(r).map_err(|e| bad("JobIDRaw", e))?;
            r.to_owned()
        }
        _ => id.job.to_owned(),
    };
    let alloc_cpus_col = u32_field(&fs, Col::AllocCpus, "AllocCPUS")?;
    let tres = match fs.get(Col::AllocTres) {
        None => None,
        Some(s) => Some(slurm::parse_tres(s).map_err(|e| bad("AllocTRES", e))?),
    };
    let nnodes_col = u32_field(&fs, Col::NNodes, "NNodes")?;
    let tres_u32 = |v: Option<u64>| v.and_then(|x| u32::try_from(x).ok());
    let alloc_cpus = alloc_cpus_col.or_else(|| tres_u32(tres.as_ref().and_then(|t| t.cpu)));
    let nnodes = nnodes_col.or_else(|| tres_u32(tres.as_ref().and_then(|t| t.node)));
    let timelimit_s = match fs.get(Col::Timelimit) {
        None => None,
        Some(s) => match slurm::parse_limit(s).map_err(|e| bad("Timelimit", e))? {
            Some(Limit::Seconds(v)) => Some(v),
            _ => None,
        },
    };
    let req_mem = match fs.get(Col::ReqMem) {
        None => None,
        Some(s) => slurm::parse_mem(s, 1024.0 * 1024.0).map_err(|e| bad("ReqMem", e))?,
    };
    let exit_code = match fs.get(Col::ExitCode) {
        None => None,
        Some(s) => slurm::parse_exit_code(s)
            .map_err(|e| bad("ExitCode", e))?
            .map(|(c, sig)| format!("{c}:{sig}")),
    };
    let zone = &opts.zone;
    let job = Job {
        cluster: fs
            .text(Col::Cluster)
            .unwrap_or_else(|| opts.cluster.clone()),
        job_id: id.job.to_owned(),
        job_id_raw: raw,
        user: fs.text(Col::User),
        account: fs.text(Col::Account),
        group: fs.text(Col::Group),
        partition: fs.text(Col::Partition),
        job_name: fs
            .get(Col::JobName)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        state: state.to_owned(),
        cancelled_by,
        exit_code,
        submit: timestamp(&fs, Col::Submit, "Submit", zone)?,
        start: timestamp(&fs, Col::Start, "Start", zone)?,
        end: timestamp(&fs, Col::End, "End", zone)?,
        elapsed_s,
        timelimit_s,
        alloc_cpus,
        alloc_gpus: tres.as_ref().map(|t| tres_u32(t.gpus).unwrap_or(0)),
        nnodes,
        ntasks,
        node_list: fs.text(Col::NodeList).filter(|s| s != "None assigned"),
        max_rss_mb: max_rss,
        is_final: slurm::state_is_final(state),
        ..Default::default()
    };
    // `sacct -D` shows each run of a requeued job: an earlier run, REQUEUED
    // with an end, is over (its record is kept by its own start), and was
    // left 'running or pending' for ever.
    let job = Job {
        is_final: job.is_final || (state == "REQUEUED" && job.end.is_some()),
        ..job
    };
    Ok(Parsed::Job(Box::new(Pending {
        key: id.job.to_owned(),
        job,
        req_mem,
        tres_mem_mb: tres.and_then(|t| t.mem_mb),
        job_cpu_s: cpu_s,
        job_gpu: gpu,
        acc: StepAcc::default(),
    })))
}

impl Pending {
    /// The job part of the id that step lines must match.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Adds a step line.
    pub fn add_step(&mut self, s: StepLine) {
        let a = &mut self.acc;
        a.steps += 1;
        // MaxRSS 0 is no reading (a process holds some memory).
        let rss = s.max_rss_mb.filter(|m| *m > 0.0);
        a.max_rss_mb = max_opt(a.max_rss_mb, rss);
        let tasks = f64::from(s.ntasks.unwrap_or(1).max(1));
        a.used_mem_mb = max_opt(a.used_mem_mb, rss.map(|m| m * tasks));
        if let Some(c) = s.cpu_s {
            a.step_cpu_s = Some(a.step_cpu_s.unwrap_or(0.0) + c);
        }
        a.gpu = a.gpu.and(s.gpu);
        if let Some(n) = s.ntasks {
            a.max_ntasks = Some(a.max_ntasks.map_or(n, |m| m.max(n)));
        }
    }

    /// Finishes the job: merges the steps and computes the derived fields.
    pub fn finish(self, notes: &mut Notes) -> Job {
        let Pending {
            mut job,
            req_mem,
            tres_mem_mb,
            job_cpu_s,
            job_gpu,
            acc,
            ..
        } = self;
        // The job line's own usage (where SLURM gives one) is the steps'
        // again: only the steps' GPU use is summed.
        GpuUse {
            util_s: None,
            ..job_gpu
        }
        .and(acc.gpu)
        .put(&mut job);
        let nodes = job.nnodes.unwrap_or(1);
        let cpus = job.alloc_cpus.unwrap_or(1);
        job.req_mem_mb = req_mem
            .map(|m| m.total_mb(nodes, cpus))
            .filter(|v| *v > 0.0)
            .or(tres_mem_mb);
        job.max_rss_mb = max_opt(job.max_rss_mb, acc.max_rss_mb).filter(|m| *m > 0.0);
        let used_mem = max_opt(job.max_rss_mb.filter(|_| acc.steps == 0), acc.used_mem_mb);
        if let Some(n) = acc.max_ntasks {
            job.ntasks = Some(job.ntasks.map_or(n, |m| m.max(n)));
        }
        let job_cpu = job_cpu_s.unwrap_or(0.0);
        job.total_cpu_s = if !job.is_final {
            // Running: TotalCPU and MaxRSS are filled in as steps end, so
            // what sacct shows is the finished steps' only. Unknown.
            None
        } else if acc.steps > 0 {
            // The job line's TotalCPU already sums the steps; sum them
            // ourselves only when the job line has none.
            if job_cpu > 0.0 {
                Some(job_cpu)
            } else {
                acc.step_cpu_s.or(job_cpu_s)
            }
        } else if job_cpu > 0.0 {
            Some(job_cpu)
        } else if job.start.is_some() && job.elapsed_s.unwrap_or(0.0) > 0.0 {
            // `sacct -X`: TotalCPU is zero on job lines. Unknown, not zero.
            notes.no_step_cpu += 1;
            None
        } else {
            job_cpu_s
        };
        job.derive(used_mem.filter(|_| job.is_final));
        job
    }
}

fn round(v: f64, places: i32) -> f64 {
    let m = 10f64.powi(places);
    (v * m).round() / m
}
