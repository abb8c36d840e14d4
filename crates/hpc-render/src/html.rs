//! The static HTML report: `index.html` (totals, the report tables and
//! charts, the worst-wasting jobs, flag counts) and one page per user (their
//! jobs, flags with reasons, plots where series exist, the recommendation).
//! Pages are self-contained (inline CSS and SVG, no scripts) and every
//! user-controlled string is escaped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use hpc_core::advice::Rec;
use hpc_core::fields::{index_of, Column, Value};
use hpc_core::paths::{create_private_dir, write_atomic};
use hpc_core::record::{Flag, Job};
use hpc_core::slurm::format_duration;
use hpc_core::{Error, IoContext, Result};

use crate::draw::{self, short_value};
use crate::job::title;
use crate::panels::plan;
use crate::report::{charts, draw_charts, rows_by_key, size, Row};
use crate::stream::Stream;

/// `s` escaped for HTML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The most bytes of a user's name, written out, that a page's file name
/// holds whole (a file name may have 255).
pub const MAX_NAME: usize = 120;

/// The file name of a user's page: bytes other than ASCII letters, digits
/// and `-` are written `_XX` (hex), so every user has one safe name. A
/// name longer than [`MAX_NAME`] so written is cut there and followed by a
/// hash of the whole name (FNV-1a, 64 bits), so it stays one name apart.
pub fn user_file(user: &str) -> String {
    let mut s = String::new();
    for b in user.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            s.push(b as char);
        } else {
            let _ = write!(s, "_{b:02X}");
        }
    }
    if s.len() > MAX_NAME {
        let hash = user.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        s.truncate(MAX_NAME);
        let _ = write!(s, "-{hash:016x}");
    }
    format!("user-{s}.html")
}

/// The file in a report folder that lists the pages the last run wrote:
/// only those are ever removed, never another file of the folder.
pub const MANIFEST: &str = ".hpc-plot-pages";

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
td.l,th.l{text-align:left}th{background:#eee}h2{margin-top:1.5em}\
.flag{color:#b35900}svg{max-width:100%;height:auto}";

/// A whole page around `body`. The content security policy allows no
/// scripts and nothing from elsewhere.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
<title>{}</title><style>{STYLE}</style></head><body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// What the pages look things up by.
pub struct Index<'a> {
    /// Jobs by user (`(none)` when absent), in input order.
    pub by_user: BTreeMap<&'a str, Vec<&'a Job>>,
    /// Flags by job id.
    pub flags: HashMap<&'a str, Vec<&'a Flag>>,
    /// Recommendations by user.
    pub recs: HashMap<&'a str, Vec<&'a Rec>>,
    /// When set, each job's id links to this prefix followed by the id
    /// (URL-escaped): hpc-web's `job/`.
    pub job_link: Option<&'a str>,
}

/// The user of a job, `(none)` when absent.
pub fn user_of(j: &Job) -> &str {
    j.user.as_deref().unwrap_or("(none)")
}

impl<'a> Index<'a> {
    /// Indexes a stream.
    pub fn new(stream: &'a Stream) -> Self {
        let mut by_user: BTreeMap<&str, Vec<&Job>> = BTreeMap::new();
        for j in &stream.jobs {
            by_user.entry(user_of(j)).or_default().push(j);
        }
        let mut flags: HashMap<&str, Vec<&Flag>> = HashMap::new();
        for f in &stream.flags {
            flags.entry(f.job_id.as_str()).or_default().push(f);
        }
        let mut recs: HashMap<&str, Vec<&Rec>> = HashMap::new();
        for r in &stream.recs {
            let user = r.user.as_deref().unwrap_or("(none)");
            by_user.entry(user).or_default();
            recs.entry(user).or_default().push(r);
        }
        Index {
            by_user,
            flags,
            recs,
            job_link: None,
        }
    }

    /// The flags of a job.
    pub fn flags_of(&self, j: &Job) -> impl Iterator<Item = &&'a Flag> {
        let raw = (j.job_id_raw != j.job_id).then_some(j.job_id_raw.as_str());
        let a = self.flags.get(j.job_id.as_str()).into_iter().flatten();
        let b = raw.and_then(|r| self.flags.get(r)).into_iter().flatten();
        a.chain(b)
    }
}

fn num(v: Option<f64>) -> String {
    v.map(short_value).unwrap_or_default()
}

fn wasted(j: &Job) -> f64 {
    j.cpu_hours_wasted.unwrap_or(0.0) + j.mem_gb_hours_wasted.unwrap_or(0.0)
}

/// How a cell of the job table shows its field.
#[derive(Clone, Copy)]
enum Show {
    /// The job id, a link where the index has one.
    Id,
    /// Text, escaped; the given text when absent.
    Text(&'static str),
    /// Seconds as a short duration.
    Duration,
    /// A whole number.
    Count,
    /// MiB shown as GiB.
    GiB,
    /// A number, shortened.
    Num,
}

/// One column of the job table: a field of the job table ([`Job::COLUMNS`])
/// with its heading and how it is shown.
struct JobCell {
    column: &'static Column<Job>,
    head: &'static str,
    show: Show,
}

const fn cell(name: &str, head: &'static str, show: Show) -> JobCell {
    JobCell {
        column: &Job::COLUMNS[index_of(Job::FIELDS, name)],
        head,
        show,
    }
}

/// The job table's columns, each a field by its name (a name that is no
/// field fails the build).
const JOB_TABLE: &[JobCell] = &[
    cell("job_id", "job", Show::Id),
    cell("user", "user", Show::Text("(none)")),
    cell("job_name", "name", Show::Text("")),
    cell("state", "state", Show::Text("")),
    cell("end", "end", Show::Text("")),
    cell("elapsed_s", "elapsed", Show::Duration),
    cell("alloc_cpus", "CPUs", Show::Count),
    cell("req_mem_mb", "req GiB", Show::GiB),
    cell("max_rss_mb", "peak GiB", Show::GiB),
    cell("cpu_eff", "CPU eff %", Show::Num),
    cell("mem_eff", "mem eff %", Show::Num),
    cell("cpu_hours_wasted", "CPU h wasted", Show::Num),
    cell("mem_gb_hours_wasted", "GiB h wasted", Show::Num),
];

/// Whether a column of the job table holds text (left-aligned).
fn is_text(show: Show) -> bool {
    matches!(show, Show::Id | Show::Text(_))
}

/// The head row of a table of [`job_row`]s.
pub fn job_head() -> String {
    let mut s = String::from("<tr>");
    for c in JOB_TABLE {
        let class = if is_text(c.show) { " class=l" } else { "" };
        let _ = write!(s, "<th{class}>{}</th>", escape(c.head));
    }
    s.push_str("</tr>\n");
    s
}

/// `s` escaped for a URL path segment: bytes other than ASCII letters,
/// digits and `-._~` as `%XX`.
pub fn url_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// One job as a table row.
pub fn job_row(j: &Job) -> String {
    job_row_link(j, None)
}

/// One job as a table row, its id a link to `link` + the id when given.
pub fn job_row_link(j: &Job, link: Option<&str>) -> String {
    let mut s = String::from("<tr>");
    for c in JOB_TABLE {
        let value = (c.column.get)(j);
        let real = match value {
            Value::Real(v) => v,
            Value::Int(v) => v.map(|v| v as f64),
            _ => None,
        };
        let text = match (c.show, value) {
            (Show::Id, Value::Text(Some(id))) => match link {
                Some(prefix) => format!(
                    "<a href=\"{}{}\">{}</a>",
                    escape(prefix),
                    url_segment(id),
                    escape(id)
                ),
                None => escape(id),
            },
            (Show::Text(none), Value::Text(t)) => escape(t.unwrap_or(none)),
            (Show::Duration, _) => real.map(draw::short_duration).unwrap_or_default(),
            (Show::Count, Value::Int(n)) => n.map(|n| n.to_string()).unwrap_or_default(),
            (Show::GiB, _) => num(real.map(|m| m / 1024.0)),
            _ => num(real),
        };
        let class = if is_text(c.show) { " class=l" } else { "" };
        let _ = write!(s, "<td{class}>{text}</td>");
    }
    s.push_str("</tr>\n");
    s
}

fn report_table(by: &str, rows: &[Row]) -> String {
    let mut s = format!(
        "<table><tr><th class=l>{}</th><th>jobs</th><th>CPU h</th><th>CPU eff %</th><th>CPU h wasted</th>\
<th>GiB h</th><th>mem eff %</th><th>GiB h wasted</th><th>GPU h</th></tr>\n",
        escape(by)
    );
    for r in rows {
        let _ = writeln!(
            s,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.key), r.jobs, short_value(r.cpu_h), num(r.cpu_eff), short_value(r.cpu_wasted_h),
            short_value(r.mem_gbh), num(r.mem_eff), short_value(r.mem_wasted_gbh), short_value(r.gpu_h)
        );
    }
    s.push_str("</table>\n");
    s
}

fn totals(stream: &Stream, idx: &Index) -> String {
    let sum = |f: fn(&Job) -> Option<f64>| stream.jobs.iter().filter_map(f).sum::<f64>();
    format!(
        "<table><tr><th class=l>jobs</th><td>{}</td></tr><tr><th class=l>users</th><td>{}</td></tr>\
<tr><th class=l>CPU hours reserved</th><td>{}</td></tr><tr><th class=l>CPU hours wasted</th><td>{}</td></tr>\
<tr><th class=l>memory GiB-hours reserved</th><td>{}</td></tr><tr><th class=l>memory GiB-hours wasted</th><td>{}</td></tr>\
<tr><th class=l>GPU hours reserved</th><td>{}</td></tr><tr><th class=l>flags</th><td>{}</td></tr></table>\n",
        stream.jobs.len(),
        idx.by_user.len(),
        short_value(sum(|j| j.cpu_hours_reserved)),
        short_value(sum(|j| j.cpu_hours_wasted)),
        short_value(sum(|j| j.mem_gb_hours_reserved)),
        short_value(sum(|j| j.mem_gb_hours_wasted)),
        short_value(sum(|j| j.gpu_hours_reserved)),
        stream.flags.len(),
    )
}

/// How many worst-wasting jobs the index lists.
pub const WORST: usize = 25;

/// One report's section: its heading, table and charts (`effs`: the
/// memory efficiencies of the jobs, for the histogram).
pub fn report_section(by: &str, rows: &[Row], effs: &[f64]) -> Result<String> {
    let mut s = format!("<h2>By {}</h2>\n", escape(by));
    s.push_str(&report_table(by, rows));
    let c = charts(by, rows, effs);
    let (svg, ()) = draw::svg(size(&c), |root| draw_charts(root, &c))?;
    s.push_str(&svg);
    Ok(s)
}

/// The section of the jobs that wasted most, `worst` sorted most first
/// (at most [`WORST`] shown).
pub fn worst_section(worst: &[&Job]) -> String {
    let mut s = format!(
        "<h2>The {} jobs that wasted most</h2>\n<table>{}",
        WORST.min(worst.len()),
        job_head()
    );
    for j in worst.iter().take(WORST) {
        s.push_str(&job_row(j));
    }
    s.push_str("</table>\n");
    s
}

/// The section of flag counts: (flag, jobs) in the order given.
pub fn flag_counts_section<'a>(counts: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let mut s = String::from(
        "<h2>Flags by kind</h2>\n<table><tr><th class=l>flag</th><th>count</th></tr>\n",
    );
    for (f, n) in counts {
        let _ = writeln!(s, "<tr><td class=l>{}</td><td>{n}</td></tr>", escape(f));
    }
    s.push_str("</table>\n");
    s
}

/// The jobs of `jobs` that wasted anything, most first.
pub fn most_wasting<'a>(jobs: impl IntoIterator<Item = &'a Job>) -> Vec<&'a Job> {
    let mut worst: Vec<&Job> = jobs.into_iter().filter(|j| wasted(j) > 0.0).collect();
    worst.sort_by(|a, b| wasted(b).total_cmp(&wasted(a)));
    worst
}

/// The index page's body.
pub fn index_body(stream: &Stream, idx: &Index, heading: &str) -> Result<String> {
    let mut s = format!(
        "<h1>{}</h1>\n<h2>Totals</h2>\n{}",
        escape(heading),
        totals(stream, idx)
    );
    let effs: Vec<f64> = stream.jobs.iter().filter_map(|j| j.mem_eff).collect();
    for (by, rows) in rows_by_key(stream) {
        s.push_str(&report_section(&by, &rows, &effs)?);
    }
    s.push_str(&worst_section(&most_wasting(&stream.jobs)));
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for f in &stream.flags {
        *counts.entry(f.flag.as_str()).or_default() += 1;
    }
    s.push_str(&flag_counts_section(counts));
    s.push_str("<h2>Users</h2>\n<ul>\n");
    for (user, jobs) in &idx.by_user {
        let _ = writeln!(
            s,
            "<li><a href=\"{}\">{}</a> ({} jobs)</li>",
            escape(&user_file(user)),
            escape(user),
            jobs.len()
        );
    }
    s.push_str("</ul>\n");
    Ok(s)
}

/// A recommendation as a short list: each resource advised, with the
/// reason hpc-model gave for it, then the stated risk.
pub fn rec_lines(r: &Rec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(tool) = &r.tool {
        out.push(format!("for {tool}"));
    }
    let items = [
        (
            "memory",
            "mem_mb",
            r.mem_mb.map(|m| format!("{} GiB", short_value(m / 1024.0))),
        ),
        ("CPUs", "cpus", r.cpus.map(|c| c.to_string())),
        ("time", "time_s", r.time_s.map(format_duration)),
        ("GPUs", "gpus", r.gpus.map(|g| g.to_string())),
    ];
    for (name, key, value) in items {
        if let Some(v) = value {
            let why = r
                .basis
                .get(key)
                .map(|b| format!(" ({})", b.note))
                .unwrap_or_default();
            out.push(format!("{name}: {v}{why}"));
        }
    }
    out.push(format!("risk: {} %", short_value(r.risk * 100.0)));
    out
}

/// The body of a user's section: jobs, flags with reasons, plots, advice.
/// `plots` is false in mail (no images there).
pub fn user_body(
    stream: &Stream,
    idx: &Index,
    user: &str,
    jobs: &[&Job],
    plots: bool,
) -> Result<String> {
    let mut s = format!(
        "<h2>Jobs of {} ({})</h2>\n<table>{}",
        escape(user),
        jobs.len(),
        job_head()
    );
    for j in jobs {
        s.push_str(&job_row_link(j, idx.job_link));
    }
    s.push_str("</table>\n<h2>Flags</h2>\n<table><tr><th class=l>job</th><th class=l>flag</th><th>value</th><th>threshold</th><th class=l>reason</th></tr>\n");
    for j in jobs {
        for f in idx.flags_of(j) {
            let _ = writeln!(
                s,
                "<tr><td class=l>{}</td><td class=\"l flag\">{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
                escape(&j.job_id), escape(&f.flag), num(f.value), num(f.threshold), escape(&f.reason)
            );
        }
    }
    s.push_str("</table>\n");
    if let Some(recs) = idx.recs.get(user) {
        s.push_str("<h2>For the next job</h2>\n");
        for r in recs {
            s.push_str("<ul>\n");
            for l in rec_lines(r) {
                let _ = writeln!(s, "<li>{}</li>", escape(&l));
            }
            s.push_str("</ul>\n");
        }
    }
    if plots {
        let mut seen = HashSet::new();
        for j in jobs {
            for id in [&j.job_id, &j.job_id_raw] {
                if stream.series.contains_key(id.as_str()) && seen.insert(id.as_str()) {
                    s.push_str(&job_svg(stream, id)?);
                }
            }
        }
    }
    Ok(s)
}

/// A job's six panels as inline SVG under a heading (empty when the
/// stream has no series for `id`).
pub fn job_svg(stream: &Stream, id: &str) -> Result<String> {
    Ok(match job_panels_svg(stream, id)? {
        Some((head, svg)) => format!("<h3>{}</h3>\n{svg}", escape(&head)),
        None => String::new(),
    })
}

/// A job's six panels as one SVG document, with its title: `None` when
/// the stream has no series for `id`.
pub fn job_panels_svg(stream: &Stream, id: &str) -> Result<Option<(String, String)>> {
    let width = 1000;
    let Some(plot) = plan(stream, id, draw::job_columns(width)) else {
        return Ok(None);
    };
    let samples = stream.series[id]
        .all()
        .map(|s| s.t.len())
        .max()
        .unwrap_or(0);
    let head = title(&plot, samples);
    let (svg, _) = draw::svg(draw::job_size(width), |root| {
        draw::draw_job(root, &plot, &head)
    })?;
    Ok(Some((head, svg)))
}

/// Writes the report into `dir` (created 0700 when missing; an existing
/// folder keeps its mode): `index.html` and one page per user, each
/// atomically (0600). Pages the previous run wrote (its manifest,
/// [`MANIFEST`]) and this one did not are removed, so a re-run replaces the
/// report; no other file of the folder is touched. An input with nothing
/// to show (no job, sample, flag, summary, report row or recommendation)
/// is an error that leaves the folder as it was: an empty pipe (a failed
/// `hpc-store dump`) never replaces a report.
pub fn write_site(dir: &Path, stream: &Stream, heading: &str) -> Result<()> {
    if stream.is_empty() {
        return Err(Error::Other(
            "no job, sample or report records in the input: the report is left as it was".into(),
        ));
    }
    create_private_dir(dir)?;
    let idx = Index::new(stream);
    let mut written = HashSet::new();
    for (user, jobs) in &idx.by_user {
        let name = user_file(user);
        let mut body = format!("<p><a href=\"index.html\">{}</a></p>\n", escape(heading));
        body.push_str(&user_body(stream, &idx, user, jobs, true)?);
        let html = page(&format!("{heading}: {user}"), &body);
        write_atomic(&dir.join(&name), |w| Ok(w.write_all(html.as_bytes())?))?;
        written.insert(name);
    }
    let mut body = index_body(stream, &idx, heading)?;
    let orphans: Vec<&String> = stream
        .series_order
        .iter()
        .filter(|id| stream.job(id).is_none())
        .collect();
    if !orphans.is_empty() {
        body.push_str("<h2>Series without a job record</h2>\n");
        for id in orphans {
            body.push_str(&job_svg(stream, id)?);
        }
    }
    let html = page(heading, &body);
    write_atomic(&dir.join("index.html"), |w| {
        Ok(w.write_all(html.as_bytes())?)
    })?;
    remove_stale(dir, &written)
}

/// Removes the pages of the previous run's manifest that are not in
/// `keep`, then writes `keep` as the manifest.
fn remove_stale(dir: &Path, keep: &HashSet<String>) -> Result<()> {
    let manifest = dir.join(MANIFEST);
    let before = std::fs::read_to_string(&manifest).unwrap_or_default();
    for name in before.lines() {
        // Only names this tool writes, in this folder.
        let ours = name.starts_with("user-") && name.ends_with(".html") && !name.contains('/');
        if ours && !keep.contains(name) {
            let p = dir.join(name);
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).ctx(|| format!("cannot remove {}", hpc_core::paths::shown(&p)))
                }
                _ => {}
            }
        }
    }
    let mut names: Vec<&String> = keep.iter().collect();
    names.sort();
    write_atomic(&manifest, |w| {
        for n in names {
            writeln!(w, "{n}")?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
    }

    #[test]
    fn user_files_are_safe_and_distinct() {
        assert_eq!(user_file("ann-1"), "user-ann-1.html");
        assert_eq!(user_file("../x"), "user-_2E_2E_2Fx.html");
        assert_ne!(user_file("a_b"), user_file("a.b"));
        assert_ne!(user_file("a_2E"), user_file("a."));
        assert_eq!(user_file("jörg"), "user-j_C3_B6rg.html");
    }

    #[test]
    fn a_job_row_has_a_cell_under_each_heading_from_its_fields() {
        let j = Job {
            job_id: "7_1".into(),
            job_name: Some("<b>".into()),
            state: "COMPLETED".into(),
            elapsed_s: Some(3600.0),
            alloc_cpus: Some(4),
            req_mem_mb: Some(8192.0),
            max_rss_mb: Some(1536.0),
            cpu_eff: Some(55.0),
            ..Job::default()
        };
        let cells = |row: &str| row.matches("<td").count();
        let row = job_row_link(&j, Some("job/"));
        assert_eq!(cells(&row), job_head().matches("<th").count());
        assert_eq!(cells(&row), JOB_TABLE.len());
        for want in [
            "<td class=l><a href=\"job/7_1\">7_1</a></td>",
            "<td class=l>(none)</td>",
            "<td class=l>&lt;b&gt;</td>",
            "<td>4</td>",
            "<td>8</td>",
            "<td>1.5</td>",
            "<td>55</td>",
        ] {
            assert!(row.contains(want), "{want} not in {row}");
        }
    }
}
