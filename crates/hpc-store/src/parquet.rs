//! The centre-scale path: the jobs table exported as hive-partitioned
//! Parquet (`DIR/end_date=YYYY-MM-DD/part-0.parquet`), and reports computed
//! over such a dataset with polars.
//!
//! The export streams jobs from SQLite in end-date order and writes each
//! date's file in row groups of [`ROW_GROUP`] jobs, so memory stays bounded
//! however large the database is. Reports scan only the files whose date can
//! match the filter, read only the columns they need, and give the filter to
//! polars as predicates, which it pushes into the Parquet scan.

use std::fs;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use hpc_core::fields::Kind as FieldKind;
use hpc_core::{Error, IoContext, Result};
use hpc_db::query::{JobRow, JobRows, Value, ValueRef};
use hpc_db::{JobFilter, Store};
use polars::io::parquet::write::BatchedWriter;
use polars::prelude::{
    col, len, lit, when, Column, DataFrame, DataType, Expr, HiveOptions, IntoColumn, LazyFrame,
    NamedFrom, ParquetWriter, PlRefPath, PolarsError, ScanArgsParquet, Series, NULL,
};

use crate::report::{raw_key_column, By, Partial, RawRow};

/// What an export wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExportStats {
    /// Jobs written.
    pub jobs: u64,
    /// Partition files written.
    pub partitions: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// The partition column, from the folder names.
pub const PARTITION_KEY: &str = "end_date";

/// The partition of jobs without an end (the Hive convention for null).
pub const DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The name of the file in each partition folder.
pub const PART_FILE: &str = "part-0.parquet";

/// Jobs per row group (and per batch held in memory while exporting).
pub const ROW_GROUP: usize = 65_536;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Real,
}

/// The exported columns, in order: the jobs table's columns that hold
/// the job table's fields ([`hpc_db::job_columns`]), then `tool`.
fn columns() -> &'static [(&'static str, Kind)] {
    static COLS: std::sync::OnceLock<Vec<(&'static str, Kind)>> = std::sync::OnceLock::new();
    COLS.get_or_init(|| {
        hpc_db::job_columns()
            .iter()
            .map(|c| {
                let kind = match c.column.field.kind {
                    FieldKind::Text => Kind::Text,
                    FieldKind::Int | FieldKind::Bool | FieldKind::Time => Kind::Int,
                    FieldKind::Real => Kind::Real,
                };
                (c.name.as_str(), kind)
            })
            .chain([("tool", Kind::Text)])
            .collect()
    })
}

fn polars_err(what: impl std::fmt::Display) -> impl FnOnce(PolarsError) -> Error {
    move |e| Error::Other(format!("parquet: {what}: {e}"))
}

/// The UTC date (`YYYY-MM-DD`) of an epoch second.
fn utc_date(epoch: i64) -> String {
    let mut s = hpc_core::slurm::Timestamp { epoch }.to_rfc3339();
    s.truncate(s.find('T').unwrap_or(s.len()));
    s
}

/// One column being filled from SQLite.
enum Buf {
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Real(Vec<Option<f64>>),
}

impl Buf {
    fn new(kind: Kind) -> Buf {
        match kind {
            Kind::Text => Buf::Text(Vec::with_capacity(1024)),
            Kind::Int => Buf::Int(Vec::with_capacity(1024)),
            Kind::Real => Buf::Real(Vec::with_capacity(1024)),
        }
    }

    /// Appends one SQLite value, converting as SQLite's own affinity would.
    fn push(&mut self, v: ValueRef<'_>, column: &str, job: &str) -> Result<()> {
        let bad = || Error::Other(format!("job {job}: column {column}: not a number"));
        match self {
            Buf::Text(b) => b.push(match v {
                ValueRef::Null => None,
                ValueRef::Integer(i) => Some(i.to_string()),
                ValueRef::Real(f) => Some(f.to_string()),
                ValueRef::Text(t) | ValueRef::Blob(t) => {
                    Some(String::from_utf8_lossy(t).into_owned())
                }
            }),
            Buf::Int(b) => b.push(match v {
                ValueRef::Null => None,
                ValueRef::Integer(i) => Some(i),
                ValueRef::Real(f) if f.fract() == 0.0 => Some(f as i64),
                ValueRef::Text(t) => Some(
                    std::str::from_utf8(t)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .ok_or_else(bad)?,
                ),
                _ => return Err(bad()),
            }),
            Buf::Real(b) => b.push(match v {
                ValueRef::Null => None,
                ValueRef::Integer(i) => Some(i as f64),
                ValueRef::Real(f) => Some(f),
                ValueRef::Text(t) => Some(
                    std::str::from_utf8(t)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .ok_or_else(bad)?,
                ),
                ValueRef::Blob(_) => return Err(bad()),
            }),
        }
        Ok(())
    }

    /// Moves the values out into a polars column, leaving the buffer empty.
    fn take(&mut self, name: &str) -> Column {
        match self {
            Buf::Text(b) => Series::new(name.into(), std::mem::take(b)),
            Buf::Int(b) => Series::new(name.into(), std::mem::take(b)),
            Buf::Real(b) => Series::new(name.into(), std::mem::take(b)),
        }
        .into_column()
    }
}

/// The rows being exported, gathered column by column until a batch (a
/// row group) is written.
struct Batch {
    bufs: Vec<Buf>,
    held: usize,
    /// The UTC day (days since the epoch) of the partition being written;
    /// None for jobs without an end.
    day: Option<i64>,
    /// Where `end_ts` and `job_id_raw` are among [`columns`].
    end_col: usize,
    id_col: usize,
}

impl Batch {
    fn new() -> Batch {
        let at = |name: &str| {
            columns()
                .iter()
                .position(|(c, _)| *c == name)
                .expect("an exported column")
        };
        Batch {
            bufs: columns().iter().map(|(_, k)| Buf::new(*k)).collect(),
            held: 0,
            day: None,
            end_col: at("end_ts"),
            id_col: at("job_id_raw"),
        }
    }

    /// Starts a partition with its first row; returns the partition's
    /// value (its date).
    fn start(&mut self, first: &[Value]) -> hpc_db::Result<String> {
        let end = end_ts(ValueRef::from(&first[self.end_col]));
        self.day = end.map(day_of);
        self.push(|i| Ok(ValueRef::from(&first[i])))?;
        Ok(end.map_or_else(|| DEFAULT_PARTITION.to_string(), utc_date))
    }

    /// True when `r` belongs to the partition being written.
    fn same_day(&self, r: &JobRow<'_>) -> hpc_db::Result<bool> {
        Ok(end_ts(r.get(self.end_col)?).map(day_of) == self.day)
    }

    /// Appends one row; `get(i)` gives its value in column `i`.
    fn push<'v>(
        &mut self,
        get: impl Fn(usize) -> hpc_db::Result<ValueRef<'v>>,
    ) -> hpc_db::Result<()> {
        let job = match get(self.id_col)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => String::new(),
        };
        for (i, (b, (name, _))) in self.bufs.iter_mut().zip(columns()).enumerate() {
            b.push(get(i)?, name, &job)?;
        }
        self.held += 1;
        Ok(())
    }

    /// Writes the rows held as one row group, creating the file's writer on
    /// the first call.
    fn flush<W: std::io::Write>(
        &mut self,
        out: &mut Option<W>,
        writer: &mut Option<BatchedWriter<W>>,
        dest: &Path,
    ) -> Result<()> {
        if self.held == 0 {
            return Ok(());
        }
        let columns: Vec<Column> = self
            .bufs
            .iter_mut()
            .zip(columns())
            .map(|(b, (name, _))| b.take(name))
            .collect();
        let df = DataFrame::new(self.held, columns).map_err(polars_err("cannot build a batch"))?;
        self.held = 0;
        if writer.is_none() {
            let out = out.take().expect("one writer per file");
            *writer = Some(
                ParquetWriter::new(out)
                    .batched(df.schema())
                    .map_err(polars_err(dest.display()))?,
            );
        }
        if let Some(w) = writer.as_mut() {
            w.write_batch(&df).map_err(polars_err(dest.display()))?;
        }
        Ok(())
    }
}

/// Seconds in a day.
const DAY: i64 = 86_400;

/// The UTC day (days since the epoch) of an epoch second.
fn day_of(epoch: i64) -> i64 {
    epoch.div_euclid(DAY)
}

/// `end_ts` as epoch seconds (None: the job has no end).
fn end_ts(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        _ => None,
    }
}

/// Writes the partition file `dest` to `out`: the row [`Batch::start`]
/// took, then the rows that follow in `rows` while they end on its day. The
/// first row of another day is put in `next`, owned, since `rows` moves on.
fn write_partition(
    out: &mut dyn std::io::Write,
    dest: &Path,
    rows: &mut JobRows<'_>,
    batch: &mut Batch,
    next: &mut Option<Vec<Value>>,
    stats: &mut ExportStats,
) -> hpc_db::Result<()> {
    let mut out = Some(BufWriter::with_capacity(1 << 20, out));
    let mut writer = None;
    while let Some(r) = rows.next()? {
        if !batch.same_day(&r)? {
            *next = Some(r.owned()?);
            break;
        }
        batch.push(|i| r.get(i))?;
        stats.jobs += 1;
        if batch.held >= ROW_GROUP {
            batch.flush(&mut out, &mut writer, dest)?;
        }
    }
    batch.flush(&mut out, &mut writer, dest)?;
    if let Some(w) = writer {
        // Writing the footer flushes the buffer into the file.
        stats.bytes += w.finish().map_err(polars_err(dest.display()))?;
    }
    Ok(())
}

/// Exports the jobs matching `filter` as hive-partitioned Parquet under `dir`:
/// `dir/end_date=YYYY-MM-DD/part-0.parquet` (the UTC date of `end_ts`; jobs
/// without an end go to `end_date=__HIVE_DEFAULT_PARTITION__`). Every column
/// of the jobs table but `ingested_at` (times as Int64 epoch seconds), plus
/// `tool` (from the job's `analysis` record, else its name). Each partition
/// file is written to a private temporary file and renamed into place, so a
/// re-export replaces the partitions it writes; files of dates no longer
/// exported stay.
///
/// A partition written replaces the file of its date, so it holds every job
/// of that date: `since` and `until` are widened to whole UTC days, and with
/// either the unfinished jobs' partition is written whole (its jobs are not
/// dated); it is removed when no job is unfinished any more. A filter on
/// anything else (user, partition, tool, job, a limit) would replace whole
/// partitions with its jobs alone: it writes only into a folder that holds
/// no partition yet.
pub fn export(store: &Store, dir: &Path, filter: &JobFilter) -> hpc_db::Result<ExportStats> {
    // Whole UTC days: from the start of since's, to the end of the day of
    // the second before until.
    let since = filter.since.map(|t| day_of(t) * DAY);
    let until = filter.until.map(|t| (day_of(t - 1) + 1) * DAY);
    let narrowed = JobFilter {
        since: None,
        until: None,
        ..filter.clone()
    };
    if !narrowed.is_empty() && has_partitions(dir) {
        return Err(hpc_db::Error::other(format!(
            "{} holds a dataset: an export filtered by user, partition, tool, job or count would replace its partitions with those jobs alone; export every job there, or these into a new folder",
            hpc_core::paths::shown(dir)
        )));
    }
    hpc_core::paths::create_private_dir(dir)?;
    let names: Vec<&str> = columns().iter().map(|(c, _)| *c).collect();
    let each = |f: &JobFilter| store.jobs_by_end(f, &names, |rows| export_rows(dir, rows));
    if narrowed.limit.is_some() {
        // A count of the latest jobs, into a new folder: one query.
        return each(filter);
    }
    // The two queries see one state of the history: a job that ended
    // between them would be in neither partition, or in both.
    store.in_one_snapshot(|| {
        let unfinished = each(&JobFilter {
            ended: Some(false),
            ..narrowed.clone()
        })?;
        if unfinished.jobs == 0 {
            // Every job that was unfinished has ended since the last export:
            // their old partition would show them twice.
            let old = dir.join(format!("{PARTITION_KEY}={DEFAULT_PARTITION}"));
            match fs::remove_file(old.join(PART_FILE)) {
                Ok(()) => {
                    let _ = fs::remove_dir(&old);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(hpc_db::Error::other(format!(
                        "cannot remove the old partition of unfinished jobs {}: {e}",
                        hpc_core::paths::shown(&old)
                    )))
                }
            }
        }
        let dated = each(&JobFilter {
            since,
            until,
            ended: Some(true),
            ..filter.clone()
        })?;
        Ok(ExportStats {
            jobs: dated.jobs + unfinished.jobs,
            partitions: dated.partitions + unfinished.partitions,
            bytes: dated.bytes + unfinished.bytes,
        })
    })
}

/// Whether `dir` holds a partition folder of a dataset already.
fn has_partitions(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|mut entries| {
        entries.any(|e| {
            e.is_ok_and(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{PARTITION_KEY}="))
            })
        })
    })
}

/// Writes the partitions of `rows`, which come in end-date order.
fn export_rows(dir: &Path, rows: &mut JobRows<'_>) -> hpc_db::Result<ExportStats> {
    let mut batch = Batch::new();
    let mut stats = ExportStats::default();
    // The first row of the next partition, read while writing the one before.
    let mut next = match rows.next()? {
        Some(r) => Some(r.owned()?),
        None => None,
    };
    while let Some(first) = next.take() {
        let name = batch.start(&first)?;
        stats.jobs += 1;
        let dest = dir.join(format!("{PARTITION_KEY}={name}")).join(PART_FILE);
        // Written beside its name and renamed over it when complete: a
        // reader sees the old file or the new one, and a failed export
        // leaves no temporary file behind.
        hpc_core::paths::write_atomic(&dest, |out| {
            Ok(write_partition(
                out, &dest, rows, &mut batch, &mut next, &mut stats,
            )?)
        })?;
        stats.partitions += 1;
    }
    Ok(stats)
}

/// The Parquet files of a dataset, skipping the partitions whose date cannot
/// match the filter's dates. Errors when `dir` is missing or holds no files.
fn dataset_files(dir: &Path, filter: &JobFilter) -> Result<Vec<PathBuf>> {
    let entries = fs::read_dir(dir).ctx(|| {
        format!(
            "no Parquet dataset at {} (hpc-store export --parquet writes one)",
            dir.display()
        )
    })?;
    // A job ending at or after `since` ends on or after since's date; one
    // ending before `until` ends on or before the date of the second before.
    let first = filter.since.map(utc_date);
    let last = filter.until.map(|u| utc_date(u - 1));
    let mut found = 0usize;
    let mut files = Vec::new();
    let mut folders: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    folders.sort();
    for folder in folders {
        let Some(name) = folder.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(value) = name
            .strip_prefix(PARTITION_KEY)
            .and_then(|v| v.strip_prefix('='))
        else {
            continue;
        };
        if !folder.is_dir() {
            continue;
        }
        let mut parts: Vec<PathBuf> = fs::read_dir(&folder)
            .ctx(|| format!("cannot read {}", folder.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.extension().is_some_and(|x| x == "parquet")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| !n.starts_with('.'))
            })
            .collect();
        found += parts.len();
        // Dated folders outside the range hold no matching job; the default
        // partition (no end) is decided by the submit time, so always read.
        let is_date =
            value.len() == 10 && value.as_bytes()[4] == b'-' && value.as_bytes()[7] == b'-';
        if is_date
            && (first.as_deref().is_some_and(|f| value < f)
                || last.as_deref().is_some_and(|l| value > l))
        {
            continue;
        }
        parts.sort();
        files.append(&mut parts);
    }
    if found == 0 {
        return Err(Error::Other(format!(
            "{} holds no Parquet dataset ({PARTITION_KEY}=*/*.parquet; hpc-store export --parquet writes one)",
            dir.display()
        )));
    }
    Ok(files)
}

/// The filter as a polars predicate (None: every job). The date conditions
/// are COALESCE(end_ts, submit_ts) compared with the bound, written so that
/// polars can check them against the Parquet statistics of `end_ts`.
fn predicate(filter: &JobFilter) -> Option<Expr> {
    let mut conds = Vec::new();
    if let Some(u) = &filter.user {
        conds.push(col("user").eq(lit(u.as_str())));
    }
    if let Some(p) = &filter.partition {
        conds.push(col("partition").eq(lit(p.as_str())));
    }
    let ended_or_submitted = |cmp: &dyn Fn(Expr) -> Expr| {
        cmp(col("end_ts")).or(col("end_ts").is_null().and(cmp(col("submit_ts"))))
    };
    if let Some(s) = filter.since {
        conds.push(ended_or_submitted(&|c: Expr| c.gt_eq(lit(s))));
    }
    if let Some(u) = filter.until {
        conds.push(ended_or_submitted(&|c: Expr| c.lt(lit(u))));
    }
    conds.into_iter().reduce(Expr::and)
}

/// `sum(value where known is not null)`, nulls counting as 0.
fn sum_known(value: Expr, known: &str) -> Expr {
    when(col(known).is_not_null())
        .then(value)
        .otherwise(lit(NULL))
        .sum()
}

/// The names of [`Partial`]'s sums in the aggregated frame.
const SUMS: [&str; 9] = [
    "__jobs",
    "__cpu_h",
    "__cpu_h_known",
    "__cpu_used_h",
    "__cpu_wasted_h",
    "__mem_gbh",
    "__mem_gbh_known",
    "__mem_wasted_gbh",
    "__gpu_h",
];

/// Reads a dataset written by [`export`] and returns the same raw rows as
/// [`crate::report::sqlite_rows`]: grouped by the raw key column (and the
/// account when grouping by group), with the sums of [`Partial`].
pub fn parquet_rows(dir: &Path, by: By, filter: &JobFilter) -> Result<Vec<RawRow>> {
    let files = dataset_files(dir, filter)?;
    if files.is_empty() {
        // Every partition was outside the dates.
        return Ok(Vec::new());
    }
    let paths = files
        .iter()
        .map(|p| PlRefPath::try_from_path(p))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(polars_err(dir.display()))?;
    let args = ScanArgsParquet {
        hive_options: HiveOptions::new_disabled(),
        ..Default::default()
    };
    let mut lf = LazyFrame::scan_parquet_files(paths.into_iter().collect(), args)
        .map_err(polars_err(dir.display()))?;
    if let Some(p) = predicate(filter) {
        lf = lf.filter(p);
    }
    let key = raw_key_column(by);
    let mut keys = vec![col(key)];
    if by == By::Group {
        keys.push(col("account"));
    }
    let real = |e: Expr| e.cast(DataType::Float64);
    let aggs: Vec<Expr> = [
        len(),
        col("cpu_hours_reserved").sum(),
        sum_known(col("cpu_hours_reserved"), "total_cpu_s"),
        sum_known(col("total_cpu_s") / lit(3600.0), "cpu_hours_reserved"),
        col("cpu_hours_wasted").sum(),
        col("mem_gb_hours_reserved").sum(),
        sum_known(col("mem_gb_hours_reserved"), "mem_gb_hours_wasted"),
        col("mem_gb_hours_wasted").sum(),
        col("gpu_hours_reserved").sum(),
    ]
    .into_iter()
    .zip(SUMS)
    .map(|(e, name)| real(e).alias(name))
    .collect();
    let df = lf
        .group_by(keys)
        .agg(aggs)
        .collect()
        .map_err(polars_err(dir.display()))?;

    let text = |name: &str| -> Result<Vec<Option<String>>> {
        let c = df.column(name).map_err(polars_err(name))?;
        let c = c.cast(&DataType::String).map_err(polars_err(name))?;
        Ok(c.str()
            .map_err(polars_err(name))?
            .iter()
            .map(|v| v.map(str::to_owned))
            .collect())
    };
    let keys = text(key)?;
    let accounts = if by == By::Group {
        text("account")?
    } else {
        vec![None; df.height()]
    };
    let mut sums: Vec<Vec<f64>> = Vec::with_capacity(SUMS.len());
    for name in SUMS {
        let c = df.column(name).map_err(polars_err(name))?;
        sums.push(
            c.f64()
                .map_err(polars_err(name))?
                .iter()
                .map(|v| v.unwrap_or(0.0))
                .collect(),
        );
    }
    Ok(keys
        .into_iter()
        .zip(accounts)
        .enumerate()
        .map(|(i, (key, account))| RawRow {
            key,
            account,
            sums: Partial {
                jobs: sums[0][i],
                cpu_h: sums[1][i],
                cpu_h_known: sums[2][i],
                cpu_used_h: sums[3][i],
                cpu_wasted_h: sums[4][i],
                mem_gbh: sums[5][i],
                mem_gbh_known: sums[6][i],
                mem_wasted_gbh: sums[7][i],
                gpu_h: sums[8][i],
                // gpu_eff and gpu_wasted_h come from the SQLite store only.
                gpu_h_known: 0.0,
                gpu_used_h: 0.0,
            },
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(86_399), "1970-01-01");
        assert_eq!(utc_date(1_767_225_600), "2026-01-01");
        assert_eq!(utc_date(-1), "1969-12-31");
    }

    #[test]
    fn missing_and_empty_folders_are_named() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nope");
        let e = parquet_rows(&missing, By::User, &JobFilter::default()).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let e = parquet_rows(d.path(), By::User, &JobFilter::default()).unwrap_err();
        assert!(
            e.to_string().contains(&d.path().display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn partitions_outside_the_dates_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        for p in [
            "end_date=2026-01-01",
            "end_date=2026-01-02",
            "end_date=__HIVE_DEFAULT_PARTITION__",
        ] {
            fs::create_dir(d.path().join(p)).unwrap();
            fs::write(d.path().join(p).join(PART_FILE), b"x").unwrap();
            fs::write(d.path().join(p).join(".part-0.parquet.tmp.1"), b"x").unwrap();
        }
        let day2 = 1_767_225_600 + 86_400;
        let f = JobFilter {
            since: Some(day2),
            ..Default::default()
        };
        let files = dataset_files(d.path(), &f).unwrap();
        assert_eq!(files.len(), 2);
        assert!(files
            .iter()
            .all(|p| !p.to_string_lossy().contains("2026-01-01")));
        let f = JobFilter {
            until: Some(day2),
            ..Default::default()
        };
        let files = dataset_files(d.path(), &f).unwrap();
        assert_eq!(files.len(), 2);
        assert!(files
            .iter()
            .all(|p| !p.to_string_lossy().contains("2026-01-02")));
    }
}
