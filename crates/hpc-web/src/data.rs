//! What each page shows, read from the history through hpc-db's named
//! queries (blocking: run on tokio's blocking threads) and rendered by
//! hpc-render, as HTML and as JSON records.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use hpc_core::advice::Rec;
use hpc_core::record::Job;
use hpc_db::report::{By, Groups, Row};
use hpc_db::{JobFilter, RecordKind, Store};
use hpc_render::html::{
    escape, flag_counts_section, job_panels_svg, job_row, job_svg, rec_lines, report_section,
    user_body, worst_section, Index,
};
use hpc_render::stream::Stream;
use serde_json::{json, Map, Value};

/// A page's answer: its title and body, and the same as JSON.
pub struct Page {
    /// The title.
    pub title: String,
    /// The HTML body (escaped).
    pub body: String,
    /// The JSON answer.
    pub json: Value,
}

/// Why a page has nothing to show.
#[derive(Debug)]
pub enum Miss {
    /// No such thing for this user (another user's job too).
    NotFound,
    /// The history cannot be read now.
    Unavailable(String),
}

impl From<hpc_db::Error> for Miss {
    fn from(e: hpc_db::Error) -> Miss {
        Miss::Unavailable(e.to_string())
    }
}

impl From<hpc_core::Error> for Miss {
    fn from(e: hpc_core::Error) -> Miss {
        Miss::Unavailable(e.to_string())
    }
}

type Result<T> = std::result::Result<T, Miss>;

fn job_value(j: &Job) -> Result<Value> {
    let mut v = serde_json::to_value(j).map_err(|e| Miss::Unavailable(e.to_string()))?;
    if let Value::Object(m) = &mut v {
        m.insert("kind".into(), "job".into());
    }
    Ok(v)
}

fn lines_to_values(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn add_all(stream: &mut Stream, lines: &[String]) {
    for l in lines {
        // A stored record the renderer cannot read is left out of the
        // page, not a failed page.
        let _ = stream.add(l);
    }
}

/// The most jobs a page of jobs lists.
pub const MAX_PER_PAGE: u64 = 200;

/// A user's jobs, the latest to end first (those with no end yet after
/// them): page `page` (from 1) of `per`, of `total`;
/// as JSON only with `json` (else as HTML only: the busiest page makes
/// one of the two).
pub fn jobs(
    store: &Store,
    user: &str,
    total: u64,
    (page, per): (u64, u64),
    base: &str,
    json: bool,
) -> Result<Page> {
    let per = per.clamp(1, MAX_PER_PAGE);
    let page = page.max(1);
    let jobs = store.jobs_page(Some(user), (page - 1).saturating_mul(per), per)?;
    let mut ids: Vec<&str> = Vec::new();
    for j in &jobs {
        ids.push(&j.job_id);
        if j.job_id_raw != j.job_id {
            ids.push(&j.job_id_raw);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let flags = store.flags_for(&ids, Some(user))?;
    let title = format!("Jobs of {user}");
    if json {
        let json = json!({
            "user": user,
            "page": page,
            "per_page": per,
            "total": total,
            "jobs": jobs.iter().map(job_value).collect::<Result<Vec<_>>>()?,
            "flags": lines_to_values(&flags),
        });
        return Ok(Page {
            title,
            body: String::new(),
            json,
        });
    }
    let mut stream = Stream {
        jobs,
        ..Stream::default()
    };
    add_all(&mut stream, &flags);
    let mut idx = Index::new(&stream);
    let link = format!("{base}job/");
    idx.job_link = Some(&link);
    let mine: Vec<&Job> = stream.jobs.iter().collect();
    let pages = total.div_ceil(per).max(1);
    let mut body = format!(
        "<h1>Jobs of {}</h1>\n<p>{total} jobs; page {page} of {pages}.</p>\n",
        escape(user)
    );
    body.push_str(&user_body(&stream, &idx, user, &mine, false)?);
    body.push_str(&pager(page, pages, per, user));
    Ok(Page {
        title,
        body,
        json: Value::Null,
    })
}

fn pager(page: u64, pages: u64, per: u64, user: &str) -> String {
    let user = hpc_render::html::url_segment(user);
    let mut s = String::from("<p class=pager>");
    if page > 1 {
        let _ = write!(
            s,
            "<a href=\"?user={user}&amp;per={per}&amp;page={}\">newer</a> ",
            page - 1
        );
    }
    if page < pages {
        let _ = write!(
            s,
            "<a href=\"?user={user}&amp;per={per}&amp;page={}\">older</a>",
            page + 1
        );
    }
    s.push_str("</p>\n");
    s
}

/// The most samples (about) one job's page reads, draws and its JSON
/// carries: a longer series is thinned evenly (see
/// `Store::dump_samples_thinned`).
pub const MAX_SAMPLES: u64 = 20_000;

/// The runs of job `id` that `user` may see (`None`: an admin, every
/// job), with the filter that selects them: not found when there are none,
/// whether the job does not exist or is another user's.
fn visible_job(store: &Store, id: &str, user: Option<&str>) -> Result<(JobFilter, Vec<Job>)> {
    let filter = JobFilter {
        user: user.map(str::to_string),
        job: Some(id.to_string()),
        ..JobFilter::default()
    };
    let mut jobs = Vec::new();
    store.for_each_job(&filter, |j| {
        jobs.push(j);
        Ok(())
    })?;
    if jobs.is_empty() {
        return Err(Miss::NotFound);
    }
    Ok((filter, jobs))
}

/// One job, when `user` may see it (`None`: an admin, every job): its
/// record, flags, panels, the records stored with it and the advice for
/// its tool.
pub fn job(
    store: &Store,
    id: &str,
    user: Option<&str>,
    advice: &(dyn Fn(&str, &str) -> Advice + Sync),
) -> Result<Page> {
    let (filter, jobs) = visible_job(store, id, user)?;
    let mut ids: Vec<&str> = jobs
        .iter()
        .flat_map(|j| [j.job_id.as_str(), j.job_id_raw.as_str()])
        .collect();
    ids.sort_unstable();
    ids.dedup();
    // An id another user's job has too (another cluster's, or ids that
    // wrapped): the records kept by it may be theirs, so they are not
    // shown (the store's dump for a user leaves them out as well).
    let mut withheld = Vec::new();
    let mut shown = Vec::new();
    for i in ids {
        match user {
            Some(u) if store.is_shared(i, u)? => withheld.push(i.to_string()),
            _ => shown.push(i),
        }
    }
    // Each id asked once: the flags of those shown, for anyone.
    let flags = store.flags_for(&shown, None)?;
    let read = |kind| -> Result<Vec<String>> {
        let mut v = Vec::new();
        store.dump(kind, &filter, |t| {
            v.push(t.to_string());
            Ok(())
        })?;
        Ok(v)
    };
    let summaries = read(RecordKind::Summary)?;
    let others = read(RecordKind::Other)?;
    let mut samples = Vec::new();
    let samples_total = store.dump_samples_thinned(&filter, MAX_SAMPLES, |t| {
        samples.push(t.to_string());
        Ok(())
    })?;
    let mut stream = Stream::default();
    for j in &jobs {
        stream.jobs.push(j.clone());
    }
    add_all(&mut stream, &flags);
    add_all(&mut stream, &summaries);
    add_all(&mut stream, &others);
    add_all(&mut stream, &samples);
    let owner = jobs[0].user.clone().unwrap_or_default();
    let tool = tool_of(&others, &jobs[0]);
    let adv = advice(&owner, &tool);
    let records: Vec<Value> = jobs.iter().map(job_value).collect::<Result<_>>()?;
    let json = json!({
        "job": records,
        "flags": lines_to_values(&flags),
        "summaries": lines_to_values(&summaries),
        "records": lines_to_values(&others),
        "samples": lines_to_values(&samples),
        "samples_total": samples_total,
        "tool": tool,
        "advice": adv.json(),
        "withheld": withheld,
    });
    let mut body = format!(
        "<h1>Job {}</h1>\n<table>{}",
        escape(id),
        hpc_render::html::job_head()
    );
    for j in &jobs {
        body.push_str(&job_row(j));
    }
    body.push_str("</table>\n");
    if !withheld.is_empty() {
        let _ = writeln!(
            body,
            "<p class=note>Job id {} is another user's job too (on another cluster, or ids that wrapped): the flags, samples and records kept under it cannot be told apart from theirs and are not shown.</p>",
            escape(&withheld.join(", "))
        );
    }
    body.push_str("<h2>Flags</h2>\n<table><tr><th class=l>flag</th><th>value</th><th>threshold</th><th class=l>reason</th></tr>\n");
    for j in &jobs {
        for f in stream.flags_of(&j.job_id, &j.job_id_raw) {
            let num = |v: Option<f64>| v.map(hpc_render::draw::short_value).unwrap_or_default();
            let _ = writeln!(
                body,
                "<tr><td class=\"l flag\">{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
                escape(&f.flag),
                num(f.value),
                num(f.threshold),
                escape(&f.reason)
            );
        }
    }
    body.push_str("</table>\n<h2>Usage over time</h2>\n");
    let mut drawn = false;
    for sid in stream.series_order.clone() {
        let svg = job_svg(&stream, &sid)?;
        drawn |= !svg.is_empty();
        body.push_str(&svg);
    }
    if !drawn {
        body.push_str("<p>No samples were kept for this job (it ran without hpc-probe).</p>\n");
    }
    let _ = write!(
        body,
        "<h2>For the next {} job</h2>\n{}",
        escape(&tool),
        adv.html()
    );
    body.push_str("<h2>The accounting record</h2>\n<table>\n");
    for r in &records {
        if let Value::Object(m) = r {
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let _ = writeln!(
                    body,
                    "<tr><th class=l>{}</th><td class=l>{}</td></tr>",
                    escape(k),
                    escape(&v)
                );
            }
        }
    }
    body.push_str("</table>\n");
    Ok(Page {
        title: format!("Job {id}"),
        body,
        json,
    })
}

/// A job's first series as one SVG, when `user` may see the job.
pub fn plot(store: &Store, id: &str, user: Option<&str>) -> Result<String> {
    let (filter, jobs) = visible_job(store, id, user)?;
    let mut stream = Stream {
        jobs,
        ..Stream::default()
    };
    store.dump_samples_thinned(&filter, MAX_SAMPLES, |t| {
        let _ = stream.add(t);
        Ok(())
    })?;
    let sid = stream.series_order.first().ok_or(Miss::NotFound)?;
    let (_, svg) = job_panels_svg(&stream, sid)?.ok_or(Miss::NotFound)?;
    Ok(svg)
}

/// The tool a job ran, as the history names it: the tool of its analysis
/// record (of `records`, the job's), else its job name.
fn tool_of(records: &[String], j: &Job) -> String {
    for r in records {
        let Ok(v) = serde_json::from_str::<Value>(r) else {
            continue;
        };
        if v.get("kind").and_then(Value::as_str) != Some("analysis") {
            continue;
        }
        let tool = v
            .get("tool")
            .or_else(|| v.get("tools").and_then(|t| t.get(0)));
        if let Some(t) = tool.and_then(Value::as_str) {
            return t.to_string();
        }
    }
    j.job_name.clone().unwrap_or_default()
}

/// The advice for a tool, or why there is none.
#[derive(Clone)]
pub enum Advice {
    /// hpc-model's `rec` record.
    Rec(Box<Rec>, Value),
    /// Why none was given.
    None(String),
}

impl Advice {
    fn json(&self) -> Value {
        match self {
            Advice::Rec(_, v) => v.clone(),
            Advice::None(why) => json!({ "error": why }),
        }
    }

    fn html(&self) -> String {
        match self {
            Advice::Rec(r, _) => {
                let mut s = String::from("<ul>\n");
                for l in rec_lines(r) {
                    let _ = writeln!(s, "<li>{}</li>", escape(&l));
                }
                s.push_str("</ul>\n");
                s
            }
            Advice::None(why) => format!("<p>No advice: {}</p>\n", escape(why)),
        }
    }
}

/// How long hpc-model may take to advise one tool.
const ADVICE_TIME: Duration = Duration::from_secs(20);

/// The advice for `user`'s next job of `tool` at the default risk, from
/// `hpc-model recommend` given the history as `hpc recommend` gives it
/// (the tools meet on a pipe): the tool's latest analysis record stands
/// for the script, else one naming the job.
pub fn advise(store: &Store, model: &Path, user: &str, tool: &str) -> Advice {
    match advise_inner(store, model, user, tool) {
        Ok(a) => a,
        Err(e) => Advice::None(e),
    }
}

fn advise_inner(
    store: &Store,
    model: &Path,
    user: &str,
    tool: &str,
) -> std::result::Result<Advice, String> {
    let filter = JobFilter {
        user: Some(user.to_string()),
        tool: Some(tool.to_string()),
        limit: Some(2000),
        ..JobFilter::default()
    };
    // The history as `hpc recommend` reads it (hpc-store dump).
    let mut history = Vec::new();
    store
        .dump_ndjson(&["job", "summary", "other"], &filter, &mut history)
        .map_err(|e| e.to_string())?;
    // The tool's latest analysis stands for the script.
    let analysis = String::from_utf8_lossy(&history)
        .lines()
        .rev()
        .find(|l| l.contains("\"kind\":\"analysis\""))
        .map(str::to_string);
    let analysis = analysis.unwrap_or_else(|| {
        json!({"kind": "analysis", "user": user, "script": "", "script_sha256": "",
               "request": {"job_name": tool}, "tool": "generic", "tools": []})
        .to_string()
    });
    let mut file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    file.write_all(analysis.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut child = Command::new(model)
        .args(["recommend", "--format", "ndjson", "--history", "-"])
        .arg(file.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", model.display()))?;
    let mut stdin = child.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&history);
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(ADVICE_TIME).is_err() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    });
    let out = child.wait_with_output();
    let _ = tx.send(());
    let _ = watchdog.join();
    let _ = writer.join();
    let out = out.map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "hpc-model failed: {}",
            err.lines().last().unwrap_or("no message")
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if v.get("kind").and_then(Value::as_str) == Some("rec") {
                let rec: Rec = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
                return Ok(Advice::Rec(Box::new(rec), v));
            }
        }
    }
    Err("hpc-model gave no advice".into())
}

/// Report rows grouped `by` as `report` records (what the CLI prints and
/// the JSON carries) and as the renderer reads those records back.
fn report_rows<'a>(
    rows: impl IntoIterator<Item = &'a Row>,
    by: By,
) -> (Vec<Map<String, Value>>, Vec<hpc_render::report::Row>) {
    let records: Vec<Map<String, Value>> = rows.into_iter().map(|r| r.record(by)).collect();
    let drawn = records
        .iter()
        .map(|m| hpc_render::report::Row::from_map(m).1)
        .collect();
    (records, drawn)
}

/// The most tools the tools page advises.
pub const MAX_TOOLS: usize = 20;

/// How many tools are advised at once.
const ADVICE_THREADS: usize = 4;

/// A user's tools: each one's jobs, efficiency and waste, and the advice
/// for the next job.
pub fn tools(
    store: &Store,
    user: &str,
    advice: &(dyn Fn(&str, &str) -> Advice + Sync),
) -> Result<Page> {
    let filter = JobFilter {
        user: Some(user.to_string()),
        ..JobFilter::default()
    };
    let (rows, _) = store.report(By::Tool, &Groups::new(), &filter)?;
    let mut body = format!("<h1>Tools of {}</h1>\n", escape(user));
    let mut list = Vec::new();
    let shown: Vec<&Row> = rows.iter().take(MAX_TOOLS).collect();
    let (records, render_rows) = report_rows(shown.iter().copied(), By::Tool);
    if rows.is_empty() {
        body.push_str("<p>No jobs yet.</p>\n");
    } else {
        body.push_str(&report_section("tool", &render_rows, &[])?);
    }
    // hpc-model runs for several tools at once (each a process of its own).
    let advices: Vec<Advice> = std::thread::scope(|scope| {
        let per_thread = shown.len().div_ceil(ADVICE_THREADS).max(1);
        let handles: Vec<_> = shown
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|r| advice(user, &r.key))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for ((r, rec), adv) in shown.iter().zip(records).zip(advices) {
        let _ = write!(body, "<h2>{}</h2>\n{}", escape(&r.key), adv.html());
        list.push(json!({ "report": rec, "advice": adv.json() }));
    }
    Ok(Page {
        title: format!("Tools of {user}"),
        body,
        json: json!({ "user": user, "tools": list, "more": rows.len().saturating_sub(MAX_TOOLS) }),
    })
}

/// What the centre-wide report groups by, in its order: every grouping
/// but the tool, which `/tools` shows.
pub fn report_by() -> Vec<By> {
    By::ALL.into_iter().filter(|b| *b != By::Tool).collect()
}

/// The centre's report over the jobs that ended in the last `days` days
/// (every job with 0), grouped by each of `by` (users to groups by
/// `groups`, else by account).
pub fn report(store: &Store, by: &[By], groups: &Groups, days: u64, base: &str) -> Result<Page> {
    let filter = JobFilter {
        since: (days > 0).then(|| hpc_db::now_epoch() - (days as i64) * 86_400),
        ..JobFilter::default()
    };
    let effs: Vec<f64> = store.jobs_by_end(&filter, &["mem_eff"], |rows| {
        let mut v = Vec::new();
        while let Some(r) = rows.next()? {
            if let hpc_db::query::ValueRef::Real(x) = r.get(0)? {
                v.push(x);
            }
        }
        Ok(v)
    })?;
    let window = if days > 0 {
        format!("the last {days} days")
    } else {
        "all time".into()
    };
    let mut body = format!("<h1>Report: {}</h1>\n", escape(&window));
    body.push_str("<form method=get><p>Window: ");
    for d in [1u64, 7, 30, 90, 365, 0] {
        let name = if d == 0 {
            "all".to_string()
        } else {
            format!("{d} days")
        };
        let _ = write!(
            body,
            "<a href=\"{}report?days={d}\">{}</a> ",
            escape(base),
            escape(&name)
        );
    }
    body.push_str("</p></form>\n");
    let mut reports = Vec::new();
    for b in by {
        let (rows, _) = store.report(*b, groups, &filter)?;
        let (records, render_rows) = report_rows(&rows, *b);
        body.push_str(&report_section(b.name(), &render_rows, &effs)?);
        reports.extend(records.into_iter().map(Value::Object));
    }
    let worst = store.most_wasting(&filter, hpc_render::html::WORST as u64)?;
    let worst_refs: Vec<&Job> = worst.iter().collect();
    body.push_str(&worst_section(&worst_refs));
    let counts = store.flag_counts(&filter)?;
    body.push_str(&flag_counts_section(
        counts.iter().map(|c| (c.flag.as_str(), c.jobs as u64)),
    ));
    let json = json!({
        "window_days": days,
        "reports": reports,
        "worst": worst.iter().map(job_value).collect::<Result<Vec<_>>>()?,
        "flags": counts.iter().map(|c| json!({"flag": c.flag, "category": c.category, "jobs": c.jobs, "users": c.users})).collect::<Vec<_>>(),
    });
    Ok(Page {
        title: format!("Report: {window}"),
        body,
        json,
    })
}

/// `s` as an OpenMetrics label value.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The OpenMetrics text: jobs, CPU and memory hours reserved and wasted by
/// partition and by state, and jobs by flag.
pub fn metrics(store: &Store) -> Result<String> {
    let all = JobFilter::default();
    let mut out = String::new();
    type Measure = fn(&Row) -> f64;
    let families: [(&str, &str, Measure); 5] = [
        ("jobs", "Jobs in the history.", |r| r.sums.jobs),
        ("cpu_hours_reserved", "CPU-hours reserved.", |r| {
            r.sums.cpu_h
        }),
        (
            "cpu_hours_wasted",
            "CPU-hours reserved and not used.",
            |r| r.sums.cpu_wasted_h,
        ),
        (
            "memory_gib_hours_reserved",
            "Memory GiB-hours reserved.",
            |r| r.sums.mem_gbh,
        ),
        (
            "memory_gib_hours_wasted",
            "Memory GiB-hours reserved and not used.",
            |r| r.sums.mem_wasted_gbh,
        ),
    ];
    for by in [By::Partition, By::State] {
        let (rows, _) = store.report(by, &Groups::new(), &all)?;
        for (name, help, value) in families {
            let metric = format!("hpc_sizer_{}_{name}", by.name());
            let _ = writeln!(
                out,
                "# TYPE {metric} gauge\n# HELP {metric} {help} By {}.",
                by.name()
            );
            for r in &rows {
                let _ = writeln!(
                    out,
                    "{metric}{{{}=\"{}\"}} {}",
                    by.name(),
                    label(&r.key),
                    value(r)
                );
            }
        }
    }
    let counts = store.flag_counts(&all)?;
    let _ = writeln!(
        out,
        "# TYPE hpc_sizer_flag_jobs gauge\n# HELP hpc_sizer_flag_jobs Jobs that raised each flag."
    );
    for c in counts {
        let _ = writeln!(
            out,
            "hpc_sizer_flag_jobs{{flag=\"{}\",category=\"{}\"}} {}",
            label(&c.flag),
            label(&c.category),
            c.jobs
        );
    }
    out.push_str("# EOF\n");
    Ok(out)
}
