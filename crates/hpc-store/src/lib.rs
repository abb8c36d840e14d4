//! hpc-store: the history database from the command line.
//!
//! - `put`: NDJSON records of any kind into the database, from stdin, files,
//!   or every finished file of a spool folder (`--spool`, the single-writer
//!   path for shared file systems);
//! - `status`: what the database holds;
//! - `dump`: records back out as NDJSON, filtered by kind, user and date.

pub mod cli;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod report;

use std::fs;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use hpc_core::ndjson::{LineReader, Rejects};
use hpc_core::record::{peek_kind, tag_into};
use hpc_core::store::{JobFilter, PutStats, Store};
use hpc_core::{Error, IoContext, Result};

/// What `put` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PutReport {
    /// Lines read.
    pub lines: u64,
    /// Records written.
    pub written: PutStats,
    /// Spool files loaded.
    pub files: u64,
}

impl std::ops::AddAssign for PutReport {
    fn add_assign(&mut self, o: PutReport) {
        self.lines += o.lines;
        self.written.jobs += o.written.jobs;
        self.written.jobs_kept += o.written.jobs_kept;
        self.written.others += o.written.others;
        self.files += o.files;
    }
}

/// Loads NDJSON records from one reader in one transaction. Bad lines are
/// reported (with `source` and line number) and skipped; a truncated last
/// line is tolerated with a warning.
pub fn put_reader(
    store: &mut Store,
    source: Option<&str>,
    input: impl BufRead,
    rejects: &mut Rejects,
) -> Result<PutReport> {
    let mut rep = PutReport::default();
    let mut lines = LineReader::new(input);
    let mut w = store.writer()?;
    while let Some(line) = lines.next_line()? {
        rep.lines += 1;
        let line = match line {
            Ok(l) => l,
            Err((n, why)) => {
                rejects.reject(source, n, &why)?;
                continue;
            }
        };
        if line.text.trim().is_empty() {
            continue;
        }
        let outcome = match peek_kind(line.text) {
            None => Err("not a JSON object with a \"kind\"".to_string()),
            Some(kind) => w.put_line(&kind, line.text),
        };
        if let Err(why) = outcome {
            if line.unterminated {
                rejects.warn(
                    source,
                    line.number,
                    &format!("truncated last line ignored: {why}"),
                );
            } else {
                rejects.reject(source, line.number, &why)?;
            }
        }
    }
    rep.written = w.commit()?;
    Ok(rep)
}

/// Loads every finished `*.ndjson` file of a spool folder (one transaction
/// per file) and moves it to `DIR/done/`. Files whose name starts with a dot
/// are still being written and are left alone. A file with rejected lines
/// has its good lines loaded and goes to `DIR/rejected/` instead.
pub fn put_spool(store: &mut Store, dir: &Path, rejects: &mut Rejects) -> Result<PutReport> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)
        .ctx(|| format!("cannot read spool {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|x| x == "ndjson")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    names.sort();
    let mut total = PutReport::default();
    for path in names {
        let shown = path.display().to_string();
        let before = rejects.rejected;
        let f = fs::File::open(&path).ctx(|| format!("cannot open {shown}"))?;
        let rep = put_reader(store, Some(&shown), std::io::BufReader::new(f), rejects)?;
        let dest_dir = dir.join(if rejects.rejected > before {
            "rejected"
        } else {
            "done"
        });
        hpc_core::paths::create_private_dir(&dest_dir)?;
        let dest = dest_dir.join(path.file_name().expect("a file has a name"));
        fs::rename(&path, &dest).ctx(|| format!("cannot move {shown} to {}", dest.display()))?;
        total += rep;
        total.files += 1;
    }
    Ok(total)
}

/// Writes the `status` lines.
pub fn status(store: &Store, path: &Path, out: &mut dyn Write) -> Result<()> {
    let c = store.conn();
    let one = |sql: &str| -> Result<i64> {
        Ok(c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))?
            .unwrap_or(0))
    };
    let jobs = one("SELECT count(*) FROM jobs")?;
    let fin = one("SELECT count(*) FROM jobs WHERE is_final = 1")?;
    let with_rss = one("SELECT count(*) FROM jobs WHERE is_final = 1 AND max_rss_mb IS NOT NULL")?;
    let ran = one("SELECT count(*) FROM jobs WHERE is_final = 1 AND start_ts IS NOT NULL")?;
    let stamp = |sql: &str| -> Result<Option<String>> {
        let epoch: Option<i64> = c.query_row(sql, [], |r| r.get(0))?;
        Ok(epoch.map(|epoch| hpc_core::slurm::Timestamp { epoch }.to_rfc3339()))
    };
    let first = stamp("SELECT min(submit_ts) FROM jobs")?;
    let last = stamp("SELECT max(end_ts) FROM jobs")?;
    let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        + fs::metadata(format!("{}-wal", path.display()))
            .map(|m| m.len())
            .unwrap_or(0);
    writeln!(out, "database: {}", path.display())?;
    writeln!(out, "schema version: {}", store.version()?)?;
    writeln!(out, "size: {:.1} MiB", size as f64 / 1048576.0)?;
    writeln!(
        out,
        "jobs: {jobs} ({fin} final, {} running or pending)",
        jobs - fin
    )?;
    writeln!(
        out,
        "date range: {} .. {}",
        first.as_deref().unwrap_or("-"),
        last.as_deref().unwrap_or("-")
    )?;
    let pct = if ran > 0 {
        100.0 * with_rss as f64 / ran as f64
    } else {
        0.0
    };
    writeln!(
        out,
        "MaxRSS coverage: {with_rss} of {ran} finished jobs that ran ({pct:.1} %)"
    )?;
    let mut st =
        c.prepare("SELECT state, count(*) FROM jobs GROUP BY state ORDER BY count(*) DESC, state")?;
    let states = st
        .query_map([], |r| {
            Ok(format!(
                "{} {}",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    writeln!(
        out,
        "states: {}",
        if states.is_empty() {
            "-".into()
        } else {
            states.join(", ")
        }
    )?;
    for (name, table) in [
        ("summaries", "summaries"),
        ("flags", "flags"),
        ("samples", "samples"),
        ("other records", "records"),
    ] {
        writeln!(
            out,
            "{name}: {}",
            one(&format!("SELECT count(*) FROM {table}"))?
        )?;
    }
    match store.mark("last_ingest")? {
        Some((v, at)) => writeln!(
            out,
            "last harvest: {} ({v})",
            hpc_core::slurm::Timestamp { epoch: at }.to_rfc3339()
        )?,
        None => writeln!(out, "last harvest: never")?,
    }
    Ok(())
}

/// The kinds `dump` can write.
pub const DUMP_KINDS: [&str; 5] = ["job", "summary", "flag", "sample", "other"];

/// Writes records back out as NDJSON. Jobs honour every filter; the other
/// kinds honour `--user` and the dates through their job.
pub fn dump(
    store: &Store,
    kinds: &[String],
    filter: &JobFilter,
    out: &mut dyn Write,
) -> Result<u64> {
    let mut n = 0;
    let mut buf = Vec::with_capacity(1024);
    for kind in kinds {
        match kind.as_str() {
            "job" => {
                n += store.for_each_job(filter, |j| {
                    buf.clear();
                    tag_into(&mut buf, "job", &j)?;
                    out.write_all(&buf)?;
                    Ok(())
                })?;
            }
            "summary" | "flag" | "sample" | "other" => {
                let (table, select) = match kind.as_str() {
                    "summary" => ("summaries", "json"),
                    "sample" => ("samples", "json"),
                    "other" => ("records", "json"),
                    _ => ("flags", "json_object('kind','flag','job_id',job_id,'flag',flag,'category',category,'value',value,'threshold',threshold,'reason',reason)"),
                };
                let (cond, ps) = filter.sql();
                let filtered = !filter.is_empty();
                let sql = if filtered {
                    format!("SELECT {select} FROM {table} t WHERE t.job_id IN (SELECT job_id_raw FROM jobs WHERE {cond}) ORDER BY 1")
                } else {
                    format!("SELECT {select} FROM {table} ORDER BY job_id")
                };
                let mut st = store.conn().prepare(&sql)?;
                let mut rows = if filtered {
                    st.query(rusqlite::params_from_iter(ps))?
                } else {
                    st.query([])?
                };
                while let Some(r) = rows.next()? {
                    let text: String = r.get(0)?;
                    out.write_all(text.as_bytes())?;
                    out.write_all(b"\n")?;
                    n += 1;
                }
            }
            other => {
                return Err(Error::Usage(format!(
                    "unknown kind '{other}' (one of {})",
                    DUMP_KINDS.join(", ")
                )))
            }
        }
    }
    out.flush()?;
    Ok(n)
}

/// `flags`: counts of each flag over the filtered jobs, or (with `jobs`)
/// the flagged jobs themselves.
pub fn store_flags(
    store: &Store,
    filter: &JobFilter,
    jobs: bool,
    format: report::Format,
    out: &mut dyn Write,
) -> Result<()> {
    use report::Cell;
    let (cond, ps) = filter.sql();
    let filtered = !filter.is_empty();
    let from = if filtered {
        format!("flags f JOIN jobs ON jobs.job_id_raw = f.job_id WHERE {cond}")
    } else {
        "flags f LEFT JOIN jobs ON jobs.job_id_raw = f.job_id".to_string()
    };
    let params = if filtered { ps } else { Vec::new() };
    let (cols, sql): (&[&str], String) = if jobs {
        (
            &["job_id", "user", "flag", "value", "threshold", "reason"],
            format!("SELECT f.job_id, jobs.user, f.flag, f.value, f.threshold, f.reason FROM {from} ORDER BY f.job_id, f.flag"),
        )
    } else {
        (
            &["flag", "category", "jobs", "users"],
            format!("SELECT f.flag, f.category, count(*), count(DISTINCT jobs.user) FROM {from} GROUP BY f.flag, f.category ORDER BY count(*) DESC, f.flag"),
        )
    };
    let mut st = store.conn().prepare(&sql)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(params), |r| {
            Ok(if jobs {
                vec![
                    Cell::Text(r.get(0)?),
                    Cell::Text(r.get::<_, Option<String>>(1)?.unwrap_or_else(|| "-".into())),
                    Cell::Text(r.get(2)?),
                    Cell::Num(r.get(3)?, 2),
                    Cell::Num(r.get(4)?, 2),
                    Cell::Text(r.get(5)?),
                ]
            } else {
                vec![
                    Cell::Text(r.get(0)?),
                    Cell::Text(r.get(1)?),
                    Cell::Num(Some(r.get::<_, i64>(2)? as f64), 0),
                    Cell::Num(Some(r.get::<_, i64>(3)? as f64), 0),
                ]
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    report::write_table(out, "flag_count", cols, &rows, format)
}

/// `history`: the distribution of peak memory, CPU efficiency and elapsed
/// time over the finished jobs of one tool.
pub fn history(
    store: &Store,
    tool: &str,
    filter: &JobFilter,
    format: report::Format,
    out: &mut dyn Write,
) -> Result<()> {
    use report::{quantile, Cell};
    let (cond, mut ps) = filter.sql();
    ps.push(rusqlite::types::Value::Text(tool.to_string()));
    let sql = format!(
        "SELECT max_rss_mb, cpu_eff, elapsed_s, req_mem_mb FROM jobs
         WHERE {cond} AND is_final = 1 AND start_ts IS NOT NULL AND {} = ?{}",
        report::TOOL_SQL,
        ps.len()
    );
    let mut st = store.conn().prepare(&sql)?;
    let mut series: [Vec<f64>; 4] = Default::default();
    let mut rows = st.query(rusqlite::params_from_iter(ps))?;
    while let Some(r) = rows.next()? {
        for (i, s) in series.iter_mut().enumerate() {
            if let Some(v) = r.get::<_, Option<f64>>(i)? {
                s.push(v);
            }
        }
    }
    let names = ["peak_rss_mb", "cpu_eff", "elapsed_s", "req_mem_mb"];
    let mut table = Vec::new();
    for (name, mut s) in names.iter().zip(series) {
        s.sort_by(f64::total_cmp);
        let mean = (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64);
        let mut row = vec![
            Cell::Text(tool.to_string()),
            Cell::Text(name.to_string()),
            Cell::Num(Some(s.len() as f64), 0),
        ];
        for q in [0.0, 0.1, 0.5, 0.9, 1.0] {
            row.push(Cell::Num(quantile(&s, q), 1));
        }
        row.push(Cell::Num(mean, 1));
        table.push(row);
    }
    report::write_table(
        out,
        "history",
        &[
            "tool", "metric", "n", "min", "p10", "p50", "p90", "max", "mean",
        ],
        &table,
        format,
    )
}
