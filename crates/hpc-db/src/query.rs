//! Every read query the tools run on the database, each behind a named
//! function: what `status`, `dump`, `flags`, `history`, `report` and the
//! Parquet export read. The tables and their SQL stay in this crate, so a
//! schema change is made here only.

use std::collections::HashMap;

use crate::error::Result;
use crate::store::{JobFilter, Store, PARENT_SQL};

/// The values of a row, as SQLite holds them (for the Parquet export).
pub use rusqlite::types::{Value, ValueRef};

/// What `status` counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Job records (every run of every job).
    pub jobs: i64,
    /// Of those, the final ones.
    pub final_jobs: i64,
    /// Final jobs that started.
    pub ran: i64,
    /// Final jobs that started and have a MaxRSS.
    pub with_rss: i64,
    /// The earliest submit time (epoch seconds).
    pub first_submit: Option<i64>,
    /// The latest end time (epoch seconds).
    pub last_end: Option<i64>,
    /// Jobs by state, most common first (then by name).
    pub states: Vec<(String, i64)>,
    /// Summary records.
    pub summaries: i64,
    /// Flag records.
    pub flags: i64,
    /// Sample records.
    pub samples: i64,
    /// Records of the other kinds (`analysis`, `rec`, `gpu`, ...).
    pub other_records: i64,
}

/// The record kinds `dump` reads from tables other than `jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Job summaries.
    Summary,
    /// Flags (rebuilt as JSON from their columns).
    Flag,
    /// Samples.
    Sample,
    /// `analysis` records only.
    Analysis,
    /// `rec` records only.
    Rec,
    /// Every record kept whole (`analysis`, `rec`, `gpu`, ...).
    Other,
}

/// One flag's count over the filtered jobs (`flags`).
#[derive(Debug, Clone, PartialEq)]
pub struct FlagCount {
    /// The flag's name.
    pub flag: String,
    /// Its category.
    pub category: String,
    /// Jobs that raised it.
    pub jobs: i64,
    /// Distinct users of those jobs.
    pub users: i64,
}

/// One flag of one job (`flags --jobs`).
#[derive(Debug, Clone, PartialEq)]
pub struct JobFlag {
    /// The job's id as the flag names it.
    pub job_id: String,
    /// The job's user, when the job is stored.
    pub user: Option<String>,
    /// The flag's name.
    pub flag: String,
    /// The measured value.
    pub value: Option<f64>,
    /// The threshold.
    pub threshold: Option<f64>,
    /// The one-line reason.
    pub reason: String,
}

/// The values of one tool's finished jobs that ran (`history`), each
/// column without its nulls, in the database's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolHistory {
    /// MaxRSS, MiB.
    pub max_rss_mb: Vec<f64>,
    /// CPU efficiency, percent.
    pub cpu_eff: Vec<f64>,
    /// Elapsed seconds.
    pub elapsed_s: Vec<f64>,
    /// Memory requested, MiB.
    pub req_mem_mb: Vec<f64>,
}

/// What a report groups the jobs table by: a column, or the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKey {
    /// The `user` column.
    User,
    /// The `account` column.
    Account,
    /// The `partition` column.
    Partition,
    /// The `node_list` column.
    NodeList,
    /// The `state` column.
    State,
    /// The tool: of the job's `analysis` record, else its job name.
    Tool,
}

impl GroupKey {
    /// The key's column: in the jobs table, and in the Parquet export.
    pub fn column(self) -> &'static str {
        match self {
            GroupKey::User => "user",
            GroupKey::Account => "account",
            GroupKey::Partition => "partition",
            GroupKey::NodeList => "node_list",
            GroupKey::State => "state",
            GroupKey::Tool => "tool",
        }
    }
}

/// Additive sums over a set of jobs. Efficiencies are computed from these,
/// weighted by reserved hours, only over jobs where usage is known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partial {
    /// Jobs.
    pub jobs: f64,
    /// CPU-hours reserved.
    pub cpu_h: f64,
    /// CPU-hours reserved by jobs whose CPU use is known.
    pub cpu_h_known: f64,
    /// CPU-hours used (TotalCPU) by those jobs.
    pub cpu_used_h: f64,
    /// CPU-hours wasted.
    pub cpu_wasted_h: f64,
    /// Memory GiB-hours reserved.
    pub mem_gbh: f64,
    /// Memory GiB-hours reserved by jobs whose peak is known.
    pub mem_gbh_known: f64,
    /// Memory GiB-hours wasted.
    pub mem_wasted_gbh: f64,
    /// GPU-hours reserved.
    pub gpu_h: f64,
    /// GPU-hours reserved by jobs whose GPU utilisation is known.
    pub gpu_h_known: f64,
    /// GPU-hours used by those jobs (reserved times utilisation).
    pub gpu_used_h: f64,
}

impl Partial {
    /// Adds `o` with its hours scaled by `w`; jobs are counted whole.
    pub fn add_scaled(&mut self, o: &Partial, w: f64) {
        self.jobs += o.jobs;
        self.cpu_h += o.cpu_h * w;
        self.cpu_h_known += o.cpu_h_known * w;
        self.cpu_used_h += o.cpu_used_h * w;
        self.cpu_wasted_h += o.cpu_wasted_h * w;
        self.mem_gbh += o.mem_gbh * w;
        self.mem_gbh_known += o.mem_gbh_known * w;
        self.mem_wasted_gbh += o.mem_wasted_gbh * w;
        self.gpu_h += o.gpu_h * w;
        self.gpu_h_known += o.gpu_h_known * w;
        self.gpu_used_h += o.gpu_used_h * w;
    }
}

/// One raw group of a report: the raw key (user, account, node list, ...),
/// the account (for group fallback) and the sums.
#[derive(Debug, Clone)]
pub struct RawRow {
    /// The raw key (`None` when the jobs have no value).
    pub key: Option<String>,
    /// The account, used when grouping by group and the user has no mapping.
    pub account: Option<String>,
    /// The sums.
    pub sums: Partial,
}

/// A compensated (Kahan-Babuska-Neumaier) sum, as SQLite's `total()`
/// computes it, so long columns add up the same whatever the order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sum {
    sum: f64,
    c: f64,
}

impl Sum {
    /// Adds `x`.
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.c += (self.sum - t) + x;
        } else {
            self.c += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The sum.
    pub fn get(self) -> f64 {
        self.sum + self.c
    }
}

/// The running sums of one raw group.
#[derive(Debug, Default)]
struct Sums([Sum; 10], u64);

impl Sums {
    /// Adds one job: cpu_hours_reserved, total_cpu_s, cpu_hours_wasted,
    /// mem_gb_hours_reserved, mem_gb_hours_wasted, gpu_hours_reserved,
    /// gpu_util.
    fn add(&mut self, v: [Option<f64>; 7]) {
        let [cpu_res, cpu_s, cpu_waste, mem_res, mem_waste, gpu, gpu_util] = v;
        let s = &mut self.0;
        self.1 += 1;
        s[0].add(cpu_res.unwrap_or(0.0));
        if let (Some(r), Some(c)) = (cpu_res, cpu_s) {
            s[1].add(r);
            s[2].add(c / 3600.0);
        }
        s[3].add(cpu_waste.unwrap_or(0.0));
        s[4].add(mem_res.unwrap_or(0.0));
        if let (Some(r), Some(w)) = (mem_res, mem_waste) {
            s[5].add(r);
            s[6].add(w);
        }
        s[7].add(gpu.unwrap_or(0.0));
        if let (Some(g), Some(u)) = (gpu, gpu_util) {
            s[8].add(g);
            s[9].add(g * u.clamp(0.0, 100.0) / 100.0);
        }
    }

    fn partial(&self) -> Partial {
        let s = &self.0;
        Partial {
            jobs: self.1 as f64,
            cpu_h: s[0].get(),
            cpu_h_known: s[1].get(),
            cpu_used_h: s[2].get(),
            cpu_wasted_h: s[3].get(),
            mem_gbh: s[4].get(),
            mem_gbh_known: s[5].get(),
            mem_wasted_gbh: s[6].get(),
            gpu_h: s[7].get(),
            gpu_h_known: s[8].get(),
            gpu_used_h: s[9].get(),
        }
    }
}

fn eq_text(v: Option<ValueRef<'_>>, k: Option<&str>) -> bool {
    match (v, k) {
        (Some(ValueRef::Text(t)), Some(k)) => t == k.as_bytes(),
        (Some(ValueRef::Null), None) => true,
        _ => false,
    }
}

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Null => None,
        other => Some(format!("{other:?}")),
    }
}

/// The rows of a [`Store::jobs_by_end`] query, read one at a time.
pub struct JobRows<'s> {
    rows: rusqlite::Rows<'s>,
    width: usize,
}

/// One row of [`JobRows`].
pub struct JobRow<'r> {
    row: &'r rusqlite::Row<'r>,
    width: usize,
}

impl JobRows<'_> {
    /// The next row, or `None` after the last.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<JobRow<'_>>> {
        let width = self.width;
        Ok(self.rows.next()?.map(|row| JobRow { row, width }))
    }
}

impl<'r> JobRow<'r> {
    /// The value of column `i` (in the order the query named them).
    pub fn get(&self, i: usize) -> Result<ValueRef<'r>> {
        Ok(self.row.get_ref(i)?)
    }

    /// Every value of the row, owned.
    pub fn owned(&self) -> Result<Vec<Value>> {
        Ok((0..self.width)
            .map(|i| self.row.get(i))
            .collect::<rusqlite::Result<_>>()?)
    }
}

impl Store {
    /// Who the stored job records (sacct's) say owns job `job_id`: the
    /// distinct users of the rows whose id or raw id it is, or whose id is a
    /// task of it (`ID_N`, an array's id standing for its tasks). Empty when
    /// no record has it.
    pub fn job_owners(&self, job_id: &str) -> Result<Vec<String>> {
        crate::store::job_owners(&self.conn, job_id)
    }

    /// What `status` counts: jobs, final jobs, MaxRSS coverage, the dates,
    /// jobs by state and the records of each other table.
    pub fn status_counts(&self) -> Result<StatusCounts> {
        let c = &self.conn;
        let one = |sql: &str| -> Result<i64> {
            Ok(c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))?
                .unwrap_or(0))
        };
        let maybe = |sql: &str| -> Result<Option<i64>> { Ok(c.query_row(sql, [], |r| r.get(0))?) };
        let mut st = c.prepare(
            "SELECT state, count(*) FROM jobs GROUP BY state ORDER BY count(*) DESC, state",
        )?;
        let states = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(StatusCounts {
            jobs: one("SELECT count(*) FROM jobs")?,
            final_jobs: one("SELECT count(*) FROM jobs WHERE is_final = 1")?,
            ran: one("SELECT count(*) FROM jobs WHERE is_final = 1 AND start_ts IS NOT NULL")?,
            with_rss: one(
                "SELECT count(*) FROM jobs WHERE is_final = 1 AND start_ts IS NOT NULL AND max_rss_mb IS NOT NULL",
            )?,
            first_submit: maybe("SELECT min(submit_ts) FROM jobs")?,
            last_end: maybe("SELECT max(end_ts) FROM jobs")?,
            states,
            summaries: one("SELECT count(*) FROM summaries")?,
            flags: one("SELECT count(*) FROM flags")?,
            samples: one("SELECT count(*) FROM samples")?,
            other_records: one("SELECT count(*) FROM records")?,
        })
    }

    /// Calls `each` with the JSON text of every stored record of `kind`
    /// whose job passes `filter` (a record of an array is kept by the
    /// array's id, so it passes when any of the array's jobs does), in job
    /// id order. Returns how many there were.
    pub fn dump(
        &self,
        kind: RecordKind,
        filter: &JobFilter,
        mut each: impl FnMut(&str) -> Result<()>,
    ) -> Result<u64> {
        let (table, select) = match kind {
            RecordKind::Summary => ("summaries", "json"),
            RecordKind::Sample => ("samples", "json"),
            RecordKind::Analysis | RecordKind::Rec | RecordKind::Other => ("records", "json"),
            RecordKind::Flag => ("flags", "json_object('kind','flag','job_id',job_id,'flag',flag,'category',category,'value',value,'threshold',threshold,'reason',reason)"),
        };
        let (wheres, ps) = records_of(kind, table, filter);
        let sql = match wheres.is_empty() {
            true => format!("SELECT {select} FROM {table} t ORDER BY job_id"),
            false => format!("SELECT {select} FROM {table} t WHERE {wheres} ORDER BY job_id"),
        };
        let mut st = self.conn.prepare(&sql)?;
        let mut rows = st.query(rusqlite::params_from_iter(ps))?;
        let mut n = 0;
        while let Some(r) = rows.next()? {
            let text: String = r.get(0)?;
            each(&text)?;
            n += 1;
        }
        Ok(n)
    }

    /// The samples of the jobs that pass `filter`, at most about `most` of
    /// them: every k-th of each job's and host's, in time order, k the
    /// smallest that keeps to `most` over all (a long job sampled every
    /// second has millions: a page of it reads the ones it draws, not
    /// all). Returns how many are stored in all.
    pub fn dump_samples_thinned(
        &self,
        filter: &JobFilter,
        most: u64,
        mut each: impl FnMut(&str) -> Result<()>,
    ) -> Result<u64> {
        let (wheres, ps) = records_of(RecordKind::Sample, "samples", filter);
        let wheres = if wheres.is_empty() {
            "1 = 1".to_string()
        } else {
            wheres
        };
        let total: u64 = self.conn.query_row(
            &format!("SELECT count(*) FROM samples t WHERE {wheres}"),
            rusqlite::params_from_iter(ps.iter()),
            |r| r.get(0),
        )?;
        let k = total.div_ceil(most.max(1)).max(1);
        // The keys first (no JSON read), then the JSON of those kept.
        let sql = format!(
            "SELECT s.json FROM (SELECT job_id, host, t,
                 row_number() OVER (PARTITION BY job_id, host ORDER BY t) AS rn
                 FROM samples t WHERE {wheres}) k
             JOIN samples s ON s.job_id = k.job_id AND s.host = k.host AND s.t = k.t
             WHERE (k.rn - 1) % {k} = 0 ORDER BY k.job_id, k.host, k.t"
        );
        let mut st = self.conn.prepare(&sql)?;
        let mut rows = st.query(rusqlite::params_from_iter(ps))?;
        while let Some(r) = rows.next()? {
            let text: String = r.get(0)?;
            each(&text)?;
        }
        Ok(total)
    }

    /// The flag joined with its job's user: one row per job id (the runs of
    /// a requeued job share their flags). Without a filter, flags of jobs
    /// not stored count too (with no user). With a user, the flags of ids
    /// another user's job has too are left out, as `dump --user` leaves
    /// them (flags are kept by job id alone).
    fn flags_from(filter: &JobFilter) -> (String, Vec<rusqlite::types::Value>) {
        let (cond, ps) = filter.sql();
        if filter.is_empty() {
            return (
                "flags f LEFT JOIN (SELECT job_id_raw, max(user) AS user FROM jobs GROUP BY job_id_raw) jobs ON jobs.job_id_raw = f.job_id".to_string(),
                Vec::new(),
            );
        }
        // The user is ?1 in the filter's parameters.
        let others = match filter.user {
            Some(_) => format!(" WHERE NOT ({})", shared_sql("f.job_id", "?1", false)),
            None => String::new(),
        };
        (
            format!("flags f JOIN (SELECT job_id_raw, max(user) AS user FROM jobs WHERE {cond} GROUP BY job_id_raw) jobs ON jobs.job_id_raw = f.job_id{others}"),
            ps,
        )
    }

    /// How many of the filtered jobs raised each flag, and their users:
    /// most common first, then by name.
    pub fn flag_counts(&self, filter: &JobFilter) -> Result<Vec<FlagCount>> {
        let (from, params) = Store::flags_from(filter);
        let sql = format!("SELECT f.flag, f.category, count(*), count(DISTINCT jobs.user) FROM {from} GROUP BY f.flag, f.category ORDER BY count(*) DESC, f.flag");
        let mut st = self.conn.prepare(&sql)?;
        let rows = st
            .query_map(rusqlite::params_from_iter(params), |r| {
                Ok(FlagCount {
                    flag: r.get(0)?,
                    category: r.get(1)?,
                    jobs: r.get(2)?,
                    users: r.get(3)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The flags of the filtered jobs, by job id and flag.
    pub fn job_flags(&self, filter: &JobFilter) -> Result<Vec<JobFlag>> {
        let (from, params) = Store::flags_from(filter);
        let sql = format!("SELECT f.job_id, jobs.user, f.flag, f.value, f.threshold, f.reason FROM {from} ORDER BY f.job_id, f.flag");
        let mut st = self.conn.prepare(&sql)?;
        let rows = st
            .query_map(rusqlite::params_from_iter(params), |r| {
                Ok(JobFlag {
                    job_id: r.get(0)?,
                    user: r.get(1)?,
                    flag: r.get(2)?,
                    value: r.get(3)?,
                    threshold: r.get(4)?,
                    reason: r.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The MaxRSS, CPU efficiency, elapsed time and memory requested of the
    /// finished jobs of `tool` that ran and pass `filter`.
    pub fn tool_history(&self, tool: &str, filter: &JobFilter) -> Result<ToolHistory> {
        let (cond, mut ps) = filter.sql();
        ps.push(rusqlite::types::Value::Text(tool.to_string()));
        let sql = format!(
            "SELECT max_rss_mb, cpu_eff, elapsed_s, req_mem_mb FROM jobs
             WHERE {cond} AND is_final = 1 AND start_ts IS NOT NULL AND tool = ?{}",
            ps.len()
        );
        let mut st = self.conn.prepare(&sql)?;
        let mut h = ToolHistory::default();
        let mut rows = st.query(rusqlite::params_from_iter(ps))?;
        while let Some(r) = rows.next()? {
            let series = [
                &mut h.max_rss_mb,
                &mut h.cpu_eff,
                &mut h.elapsed_s,
                &mut h.req_mem_mb,
            ];
            for (i, s) in series.into_iter().enumerate() {
                if let Some(v) = r.get::<_, Option<f64>>(i)? {
                    s.push(v);
                }
            }
        }
        Ok(h)
    }

    /// The report's sums of the jobs passing `filter`, one [`RawRow`] per
    /// raw key (and account, `with_account`), in no particular order.
    pub fn report_partials(
        &self,
        key: GroupKey,
        with_account: bool,
        filter: &JobFilter,
    ) -> Result<Vec<RawRow>> {
        let (cond, ps) = filter.sql();
        let key = key.column();
        let account = if with_account { "account" } else { "NULL" };
        // Summing here rather than with SQL's GROUP BY avoids sorting every row
        // through a temporary B-tree: a plain scan is about three times faster.
        let sql = format!(
            "SELECT {key}, {account}, cpu_hours_reserved, total_cpu_s, cpu_hours_wasted,
                    mem_gb_hours_reserved, mem_gb_hours_wasted, gpu_hours_reserved, gpu_util
             FROM jobs WHERE {cond}"
        );
        let mut st = self.conn.prepare(&sql)?;
        let mut rows = st.query(rusqlite::params_from_iter(ps))?;
        type Key = (Option<String>, Option<String>);
        let mut groups: HashMap<Key, Sums> = HashMap::new();
        // The previous row's key: consecutive rows often share it.
        let mut last: Option<Key> = None;
        while let Some(r) = rows.next()? {
            let same = last.as_ref().is_some_and(|(k, a)| {
                eq_text(r.get_ref(0).ok(), k.as_deref()) && eq_text(r.get_ref(1).ok(), a.as_deref())
            });
            if !same {
                last = Some((text(r.get_ref(0)?), text(r.get_ref(1)?)));
            }
            let k = last.as_ref().expect("set above");
            let v = [
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ];
            match groups.get_mut(k) {
                Some(s) => s.add(v),
                None => groups.entry(k.clone()).or_default().add(v),
            }
        }
        Ok(groups
            .into_iter()
            .map(|((key, account), s)| RawRow {
                key,
                account,
                sums: s.partial(),
            })
            .collect())
    }

    /// Reads the jobs passing `filter` in `end_ts` order (jobs without an
    /// end first), with the `columns` of the jobs table named (`tool`: the
    /// job's tool, as [`GroupKey::Tool`]), and gives the rows to `read`.
    pub fn jobs_by_end<T>(
        &self,
        filter: &JobFilter,
        columns: &[&str],
        read: impl FnOnce(&mut JobRows<'_>) -> Result<T>,
    ) -> Result<T> {
        let (cond, ps) = filter.sql();
        let cols: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
        // The end_ts index gives the rows in date order.
        let sql = format!(
            "SELECT {} FROM jobs WHERE {cond} ORDER BY end_ts",
            cols.join(", ")
        );
        let mut st = self.conn.prepare(&sql)?;
        let mut rows = JobRows {
            rows: st.query(rusqlite::params_from_iter(ps))?,
            width: columns.len(),
        };
        read(&mut rows)
    }
}

/// The kinds [`Store::dump_ndjson`] writes: `other` is every record of a
/// kind the store keeps whole (`analysis`, `rec`, ...), `analysis` and `rec`
/// those alone.
pub const DUMP_KINDS: [&str; 7] = [
    "job", "summary", "flag", "sample", "analysis", "rec", "other",
];

impl Store {
    /// Writes the records of `kinds` back out as NDJSON, as `hpc-store dump`
    /// prints them (and hpc-web hands hpc-model): jobs honour every filter;
    /// the other kinds honour it through their job. Returns how many.
    pub fn dump_ndjson(
        &self,
        kinds: &[&str],
        filter: &JobFilter,
        out: &mut dyn std::io::Write,
    ) -> Result<u64> {
        let mut n = 0;
        let mut buf = Vec::with_capacity(1024);
        // Each record once: a kind named twice, or `analysis` or `rec`
        // beside `other` (which holds them), is written once.
        let whole = kinds.contains(&"other");
        let mut done = std::collections::HashSet::new();
        for kind in kinds {
            if !done.insert(*kind) || (whole && matches!(*kind, "analysis" | "rec")) {
                continue;
            }
            let kind = match *kind {
                "job" => {
                    n += self.for_each_job(filter, |j| {
                        buf.clear();
                        hpc_core::record::tag_into(&mut buf, "job", &j)?;
                        out.write_all(&buf)?;
                        Ok(())
                    })?;
                    continue;
                }
                "summary" => RecordKind::Summary,
                "flag" => RecordKind::Flag,
                "sample" => RecordKind::Sample,
                "analysis" => RecordKind::Analysis,
                "rec" => RecordKind::Rec,
                "other" => RecordKind::Other,
                other => {
                    return Err(hpc_core::Error::Usage(format!(
                        "unknown kind '{other}' (one of {})",
                        DUMP_KINDS.join(", ")
                    ))
                    .into())
                }
            };
            n += self.dump(kind, filter, |text| {
                out.write_all(text.as_bytes())?;
                out.write_all(b"\n")?;
                Ok(())
            })?;
        }
        out.flush()?;
        Ok(n)
    }
}

/// SQL that is true when a job of another user than `user` (SQL text: a
/// parameter) has the id `id` (SQL text): as its raw id, or, for records
/// kept by an array's or a heterogeneous job's id (`parents`), as the id
/// its tasks or components carry (`ID_N`, `ID+N`).
pub(crate) fn shared_sql(id: &str, user: &str, parents: bool) -> String {
    let other = format!("o.user IS NOT {user}");
    let mut any = vec![
        format!("EXISTS (SELECT 1 FROM jobs o WHERE o.job_id_raw = {id} AND {other})"),
        format!("EXISTS (SELECT 1 FROM jobs o WHERE o.job_id = {id} AND {other})"),
    ];
    if parents {
        // The ids that begin with `ID_` ('`' follows '_') or `ID+` (','
        // follows '+'), on the job id's index.
        for (from, to) in [("_", "`"), ("+", ",")] {
            any.push(format!(
                "EXISTS (SELECT 1 FROM jobs o WHERE o.job_id > {id} || '{from}' AND o.job_id < {id} || '{to}' AND {other})"
            ));
        }
    }
    any.join(" OR ")
}

/// The condition (on the record table as `t`; empty for every record) and
/// its parameters that select the records of `kind` whose job passes
/// `filter`; see [`Store::dump`].
fn records_of(
    kind: RecordKind,
    table: &str,
    filter: &JobFilter,
) -> (String, Vec<rusqlite::types::Value>) {
    let (cond, ps) = filter.sql();
    let mut wheres = Vec::new();
    match kind {
        RecordKind::Analysis => wheres.push("t.kind = 'analysis'".to_string()),
        RecordKind::Rec => wheres.push("t.kind = 'rec'".to_string()),
        _ => {}
    }
    if filter.is_empty() {
        return (wheres.join(" AND "), Vec::new());
    }
    // An array's analysis is keyed by the array's id.
    let mine = if table == "records" {
        format!("SELECT job_id_raw AS id FROM jobs WHERE {cond} UNION SELECT {PARENT_SQL} FROM jobs WHERE {cond}")
    } else {
        format!("SELECT job_id_raw AS id FROM jobs WHERE {cond}")
    };
    // A user's records are those of ids no other user's job has (the user
    // is ?1 in the filter's parameters): records are kept by job id alone,
    // and one id may be two users' jobs (on two clusters, or ids that
    // wrapped).
    let others = match filter.user {
        Some(_) => format!(
            " WHERE NOT ({})",
            shared_sql("m.id", "?1", table == "records")
        ),
        None => String::new(),
    };
    wheres.push(format!("t.job_id IN (SELECT m.id FROM ({mine}) m{others})"));
    (wheres.join(" AND "), ps)
}
