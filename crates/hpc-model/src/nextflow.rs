//! Nextflow trace files as `-with-trace` writes them: tab-separated, a
//! header line, `-` for a missing value, sizes as `4 GB` or `512 MB` (raw
//! bytes when `trace.raw` is set), durations as `1h 2m 3s` or `850ms` (raw
//! milliseconds), percentages as `95.3%`, dates as `2023-04-07 19:07:36.103`
//! (raw epoch milliseconds).
//!
//! A task is grouped by its `process` column, else by its `name` without the
//! ` (tag)`. Completed and cached tasks are replayed; a task retried by
//! Nextflow (`attempt` > 1) is replayed once, as its last attempt, with the
//! request of its first attempt when the trace has it.

use std::collections::HashMap;
use std::io::Read;

use hpc_core::ndjson::Rejects;
use hpc_core::{Error, Result};

use crate::calib::{Calibrated, Level, Rounding, Seen};
use crate::trace::{order_key, Resource, Trace, TraceJob};

/// One usable task of a Nextflow trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The process (the group).
    pub process: String,
    /// The task's name (`PROC (tag)`).
    pub name: String,
    /// Peak RSS, MiB.
    pub peak_mb: Option<f64>,
    /// The `memory` directive of the first attempt, MiB.
    pub memory_mb: Option<f64>,
    /// Runtime, seconds.
    pub realtime_s: Option<f64>,
    /// The `time` directive of the first attempt, seconds.
    pub time_s: Option<f64>,
    /// Bytes read, MiB.
    pub rchar_mb: Option<f64>,
    /// The attempt (1 when the trace has no `attempt` column).
    pub attempt: u32,
    /// The order key (`submit`, else the row).
    pub order: (f64, String),
}

/// What reading a Nextflow trace found.
#[derive(Debug, Default)]
pub struct NfTrace {
    /// Usable tasks (completed or cached), in file order.
    pub tasks: Vec<Task>,
    /// Data rows read.
    pub rows: u64,
    /// Rows that are not a finished task (failed, aborted, still running).
    pub unfinished: u64,
}

/// A size cell in MiB: `4 GB`, `512 MB`, `1.5 KB`, `10 B`, or raw bytes.
pub fn parse_size(cell: &str) -> std::result::Result<f64, String> {
    let s = cell.trim();
    let (num, unit) = split_unit(s);
    let v: f64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
    let per: f64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "KB" | "K" => 1024.0,
        "MB" | "M" => 1024.0 * 1024.0,
        "GB" | "G" => 1024.0 * 1024.0 * 1024.0,
        "TB" | "T" => 1024f64.powi(4),
        "PB" | "P" => 1024f64.powi(5),
        _ => return Err(format!("'{s}': unknown size unit")),
    };
    finite(v * per / (1024.0 * 1024.0), s)
}

/// A duration cell in seconds: `1h 2m 3s`, `850ms`, `2d 1h`, `3.5s`, or raw
/// milliseconds.
pub fn parse_duration(cell: &str) -> std::result::Result<f64, String> {
    let s = cell.trim();
    if let Ok(ms) = s.parse::<f64>() {
        return finite(ms / 1000.0, s);
    }
    let mut total = 0.0;
    let mut any = false;
    for word in s.split_whitespace() {
        let (num, unit) = split_unit(word);
        let v: f64 = num
            .parse()
            .map_err(|_| format!("'{s}' is not a duration"))?;
        total += v * match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(format!("'{s}': unknown duration unit")),
        };
        any = true;
    }
    if !any {
        return Err(format!("'{s}' is not a duration"));
    }
    finite(total, s)
}

fn finite(v: f64, s: &str) -> std::result::Result<f64, String> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("'{s}' is not a finite non-negative value"))
    }
}

/// `4 GB` -> (`4`, `GB`); `850ms` -> (`850`, `ms`).
fn split_unit(s: &str) -> (&str, &str) {
    let at = s
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(s.len());
    // `inf` and `nan` start with a letter: keep them whole so that the
    // number parse names them.
    if at == 0 {
        return (s, "");
    }
    (s[..at].trim(), s[at..].trim())
}

/// The process of a task: the `process` cell, else its name without the
/// trailing ` (tag)`. A process name has no space (an identifier, or
/// `WORKFLOW:PROCESS`), and a tag may hold parentheses of its own
/// (`FASTQC (s1 (rep1))`): the tag starts at the first ` (`.
fn process_of(process: Option<&str>, name: &str) -> String {
    match process.filter(|p| !p.is_empty() && *p != "-") {
        Some(p) => p.to_owned(),
        None => match name.find(" (") {
            Some(at) if name.ends_with(')') => name[..at].to_owned(),
            _ => name.to_owned(),
        },
    }
}

/// Reads a Nextflow trace; a row with a cell that cannot be read (`inf`,
/// `nan`, a word where a size is due) or with the wrong number of fields
/// is rejected with its line and reason.
pub fn read(input: impl Read, source: &str, rejects: &mut Rejects) -> Result<NfTrace> {
    let mut r = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .flexible(true)
        .quoting(false)
        .from_reader(input);
    let head = r.headers()?.clone();
    let col = |name: &str| head.iter().position(|h| h.trim() == name);
    let name = col("name").or(col("process")).ok_or_else(|| {
        Error::Usage(format!(
            "{}: a Nextflow trace needs a name or process column",
            hpc_core::paths::escaped(source)
        ))
    })?;
    let (process, status, attempt) = (col("process"), col("status"), col("attempt"));
    let (peak, memory, realtime, time) =
        (col("peak_rss"), col("memory"), col("realtime"), col("time"));
    let (rchar, submit) = (col("rchar"), col("submit"));
    let mut out = NfTrace::default();
    let mut first: HashMap<String, (Option<f64>, Option<f64>)> = HashMap::new();
    let mut raw = csv::ByteRecord::new();
    while r.read_byte_record(&mut raw)? {
        out.rows += 1;
        let line = raw.position().map_or(out.rows + 1, |p| p.line());
        // A row with bytes that are not UTF-8 is rejected; the rest is read.
        let rec = match csv::StringRecord::from_byte_record(raw.clone()) {
            Ok(rec) => rec,
            Err(_) => {
                rejects.reject(Some(source), line, "not UTF-8 text")?;
                continue;
            }
        };
        if rec.len() != head.len() {
            let why = format!("{} fields, the header has {}", rec.len(), head.len());
            rejects.reject(Some(source), line, &why)?;
            continue;
        }
        let cell = |i: Option<usize>| {
            i.and_then(|i| rec.get(i))
                .map(str::trim)
                .filter(|s| !s.is_empty() && *s != "-")
        };
        let parsed = (|| {
            let read = |i, what: &str, f: fn(&str) -> std::result::Result<f64, String>| {
                cell(i)
                    .map(f)
                    .transpose()
                    .map_err(|e| format!("{what} {e}"))
            };
            Ok::<_, String>((
                read(peak, "peak_rss", parse_size)?,
                read(memory, "memory", parse_size)?,
                read(realtime, "realtime", parse_duration)?,
                read(time, "time", parse_duration)?,
                read(rchar, "rchar", parse_size)?,
                match cell(attempt) {
                    None => 1,
                    Some(a) => a
                        .parse::<u32>()
                        .map_err(|_| format!("attempt '{a}' is not a whole number"))?,
                },
            ))
        })();
        let (peak_mb, memory_mb, realtime_s, time_s, rchar_mb, attempt) = match parsed {
            Ok(v) => v,
            Err(why) => {
                rejects.reject(Some(source), line, &hpc_core::paths::escaped(&why))?;
                continue;
            }
        };
        let task_name = cell(Some(name)).unwrap_or("").to_owned();
        let group = process_of(cell(process), &task_name);
        let asked = first
            .entry(task_name.clone())
            .or_insert((memory_mb, time_s));
        let (memory_mb, time_s) = if attempt > 1 {
            *asked
        } else {
            (memory_mb, time_s)
        };
        let done = cell(status).map_or(true, |s| matches!(s, "COMPLETED" | "CACHED"));
        if !done {
            out.unfinished += 1;
            continue;
        }
        out.tasks.push(Task {
            process: group,
            name: task_name,
            peak_mb,
            memory_mb,
            realtime_s,
            time_s,
            rchar_mb,
            attempt,
            order: match cell(submit) {
                Some(s) => order_key(s),
                None => (out.rows as f64, String::new()),
            },
        });
    }
    Ok(out)
}

impl NfTrace {
    /// The tasks as a trace of `resource`, in submit order: memory is peak
    /// RSS against `memory`, weighted by `realtime`; time is `realtime`
    /// against `time`. Tasks without the value are skipped (counted).
    pub fn trace(&self, resource: Resource) -> Trace {
        let mut t = Trace {
            rows: self.rows,
            skipped: self.unfinished,
            ..Default::default()
        };
        for task in &self.tasks {
            let (used, request, weight) = match resource {
                Resource::Mem => (task.peak_mb, task.memory_mb, task.realtime_s),
                Resource::Time => (task.realtime_s, task.time_s, Some(1.0)),
            };
            match (used, weight) {
                (Some(u), Some(w)) if u > 0.0 && w > 0.0 => {
                    t.retried += u64::from(task.attempt > 1);
                    t.jobs.push(TraceJob {
                        group: task.process.clone(),
                        used: u,
                        request: request.filter(|v| *v > 0.0),
                        weight: w,
                        input: task.rchar_mb,
                        order: task.order.clone(),
                    });
                }
                _ => t.skipped += 1,
            }
        }
        crate::trace::sort(&mut t.jobs);
        t
    }
}

/// The advice for one process of a trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProcessAdvice {
    /// The process.
    pub process: String,
    /// Tasks of it replayed (memory).
    pub tasks: usize,
    /// Memory to give its tasks, MiB (`None` with too little history).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<f64>,
    /// The largest peak of its tasks, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_peak_mb: Option<f64>,
    /// The level memory was sized at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_level: Option<f64>,
    /// Time to give its tasks, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// The level time was sized at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_level: Option<f64>,
}

/// One process's advice for one resource: the value, the largest used, the
/// level.
type Advised = Option<(f64, f64, f64)>;

/// Replays the trace's tasks of one resource and advises each process:
/// (process, tasks, advice) in first-seen order, and the level reached over
/// the whole replay.
fn advise_one(
    trace: &Trace,
    risk: f64,
    rounding: Rounding,
) -> (Vec<(String, usize, Advised)>, Level) {
    let mut order: Vec<String> = Vec::new();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for job in &trace.jobs {
        let n = count.entry(job.group.as_str()).or_default();
        if *n == 0 {
            order.push(job.group.clone());
        }
        *n += 1;
    }
    // Per process, whatever the input: the advice goes into a config that
    // every task of the process shares.
    let mut cal = Calibrated::new(&[risk], rounding);
    cal.replay(trace.jobs.iter().map(|job| Seen {
        group: &job.group,
        input: None,
        value: job.used,
        censored: false,
        weight: job.weight,
        request: None,
    }));
    let out = order
        .into_iter()
        .map(|g| {
            let advice = cal
                .advise(&g, None, None)
                .map(|(p, v)| (v[0], p.max_seen, cal.sized(&p, &cal.levels[0]).1));
            let n = count[g.as_str()];
            (g, n, advice)
        })
        .collect();
    (out, cal.levels[0])
}

impl NfTrace {
    /// The advice per process at `risk` (a fraction): memory from the
    /// tasks' peaks rounded by `mem`, time from their runtimes rounded by
    /// `time`, each by the calibrated sizer of [`crate::calib`] replayed
    /// over the whole trace. Returns the processes and the memory and time
    /// levels reached.
    pub fn advise(
        &self,
        risk: f64,
        mem: Rounding,
        time: Rounding,
    ) -> (Vec<ProcessAdvice>, Level, Level) {
        let (m, ml) = advise_one(&self.trace(Resource::Mem), risk, mem);
        let (t, tl) = advise_one(&self.trace(Resource::Time), risk, time);
        let times: HashMap<String, Advised> = t.into_iter().map(|(g, _, a)| (g, a)).collect();
        let out = m
            .into_iter()
            .map(|(process, tasks, a)| {
                let t = times.get(&process).copied().flatten();
                ProcessAdvice {
                    process,
                    tasks,
                    mem_mb: a.map(|a| a.0),
                    max_peak_mb: a.map(|a| a.1),
                    mem_level: a.map(|a| hpc_core::num::round6(a.2)),
                    time_s: t.map(|t| t.0),
                    time_level: t.map(|t| hpc_core::num::round6(t.2)),
                }
            })
            .collect();
        (out, ml, tl)
    }
}

/// A process name inside a single-quoted Nextflow string.
fn nf_quote(name: &str) -> String {
    name.replace('\\', "\\\\").replace('\'', "\\'")
}

/// The advice as a Nextflow config (`nextflow run ... -c THIS`).
pub fn to_nextflow(advice: &[ProcessAdvice], header: &str) -> String {
    let mut out = format!("// {header}\nprocess {{\n");
    for a in advice
        .iter()
        .filter(|a| a.mem_mb.is_some() || a.time_s.is_some())
    {
        out.push_str(&format!("    withName: '{}' {{\n", nf_quote(&a.process)));
        if let Some(m) = a.mem_mb {
            out.push_str(&format!("        memory = '{m:.0} MB'\n"));
        }
        if let Some(t) = a.time_s {
            out.push_str(&format!("        time = '{:.0}m'\n", (t / 60.0).ceil()));
        }
        out.push_str("    }\n");
    }
    out.push_str("}\n");
    out
}

/// A rule name as a YAML key: plain when it is a word, else double-quoted
/// with every character YAML does not print as itself escaped (C0 and C1
/// controls, DEL, NEL, the line and paragraph separators, the BOM), which a
/// YAML reader would refuse or read as a line break.
fn yaml_key(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return name.to_owned();
    }
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The advice as a Snakemake profile's `set-resources` (mem_mb, runtime in
/// minutes).
pub fn to_snakemake(advice: &[ProcessAdvice], header: &str) -> String {
    let mut out = format!("# {header}\nset-resources:\n");
    for a in advice
        .iter()
        .filter(|a| a.mem_mb.is_some() || a.time_s.is_some())
    {
        out.push_str(&format!("  {}:\n", yaml_key(&a.process)));
        if let Some(m) = a.mem_mb {
            out.push_str(&format!("    mem_mb: {m:.0}\n"));
        }
        if let Some(t) = a.time_s {
            out.push_str(&format!("    runtime: {:.0}\n", (t / 60.0).ceil()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_with_parentheses_is_still_the_tag() {
        // `FASTQC (s1 (rep1))` was process "FASTQC (s1": each task a group
        // of its own.
        assert_eq!(process_of(None, "FASTQC (s1 (rep1))"), "FASTQC");
        assert_eq!(process_of(None, "NF:ALIGN (a)"), "NF:ALIGN");
        assert_eq!(process_of(None, "MULTIQC"), "MULTIQC");
        assert_eq!(process_of(Some("P"), "X (y)"), "P");
    }

    #[test]
    fn sizes_durations_and_raw_values() {
        assert_eq!(parse_size("4 GB").unwrap(), 4096.0);
        assert_eq!(parse_size("512 MB").unwrap(), 512.0);
        assert_eq!(parse_size("1048576").unwrap(), 1.0);
        assert!((parse_size("1.5 KB").unwrap() - 1.5 / 1024.0).abs() < 1e-12);
        assert_eq!(parse_duration("1h 2m 3s").unwrap(), 3723.0);
        assert_eq!(parse_duration("850ms").unwrap(), 0.85);
        assert_eq!(parse_duration("2d 1h").unwrap(), 176400.0);
        assert_eq!(parse_duration("90000").unwrap(), 90.0);
        for bad in ["inf", "nan", "NaN GB", "inf GB", "4 XB", "fast", "-1 GB"] {
            assert!(
                parse_size(bad).is_err() || parse_duration(bad).is_err(),
                "{bad}"
            );
        }
        assert!(parse_size("inf").unwrap_err().contains("'inf'"));
        assert!(parse_duration("nan").is_err());
    }

    #[test]
    fn a_trace_with_dashes_tags_retries_and_bad_rows() {
        let tsv = "task_id\thash\tname\tstatus\texit\tsubmit\trealtime\tpeak_rss\trchar\tmemory\ttime\tattempt\n\
            1\tab/1\tFASTQC (s1)\tCOMPLETED\t0\t2023-04-07 19:07:36.103\t1m 2s\t300 MB\t1 GB\t2 GB\t1h\t1\n\
            2\tab/2\tALIGN (s1)\tFAILED\t137\t2023-04-07 19:07:37.000\t10m\t3.9 GB\t5 GB\t4 GB\t2h\t1\n\
            3\tab/3\tALIGN (s1)\tCOMPLETED\t0\t2023-04-07 19:20:00.000\t12m\t5 GB\t5 GB\t8 GB\t4h\t2\n\
            4\tab/4\tFASTQC (s2)\tCOMPLETED\t0\t2023-04-07 19:07:38.000\t-\t-\t-\t2 GB\t1h\t1\n\
            5\tab/5\tFASTQC (s3)\tCOMPLETED\t0\t2023-04-07 19:07:39.000\t1m\tinf\t1 GB\t2 GB\t1h\t1\n\
            6\tab/6\tFASTQC (s4)\tCOMPLETED\t0\n";
        let mut rej = Rejects::new("t");
        let nf = read(tsv.as_bytes(), "trace.txt", &mut rej).unwrap();
        assert_eq!(rej.rejected, 2, "inf and the ragged row");
        assert_eq!((nf.rows, nf.unfinished, nf.tasks.len()), (6, 1, 3));
        let t = nf.trace(Resource::Mem);
        assert_eq!(t.jobs.len(), 2, "the task with '-' is skipped");
        assert_eq!(t.skipped, 2);
        assert_eq!(t.retried, 1);
        let align = t.jobs.iter().find(|j| j.group == "ALIGN").unwrap();
        assert_eq!(align.used, 5120.0);
        assert_eq!(align.request, Some(4096.0), "the first attempt's request");
        assert_eq!(align.weight, 720.0);
        let time = nf.trace(Resource::Time);
        assert_eq!(time.jobs[0].group, "FASTQC");
        assert_eq!(time.jobs[0].used, 62.0);
        assert_eq!(time.jobs[0].request, Some(3600.0));
    }
}
