//! The command line of hpc-store.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use argh::FromArgs;
use hpc_core::input::Inputs;
use hpc_core::ndjson::Rejects;
use hpc_core::{paths, slurm, Error, Result};
use hpc_db::{JobFilter, Store};

use crate::report::{self, By, Format};
use crate::{
    dump, history, put_reader, put_spool, status, store_flags, PutReport, SpoolOptions, DUMP_KINDS,
};

#[derive(FromArgs, Debug)]
/// The hpc-sizer history database: store records, show what it holds, read
/// them back, report on them, export them.
#[argh(
    example = "hpc-flags < job.ndjson | hpc-store put",
    example = "hpc-store put --spool $HPC_SIZER_SPOOL/incoming",
    example = "hpc-store dump --kind job --user alice --since 2026-01-01 | hpc-flags | hpc-store put",
    note = "The database is --db, else $HPC_SIZER_DB, else $XDG_DATA_HOME/hpc-sizer/hpc-sizer.db.",
    note = "Exit status: 0 success, 1 some lines rejected or a failure, 2 usage error."
)]
pub struct Args {
    /// the database file (overrides HPC_SIZER_DB)
    #[argh(option)]
    pub db: Option<PathBuf>,

    #[argh(subcommand)]
    pub cmd: Cmd,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
#[allow(missing_docs)]
pub enum Cmd {
    Put(PutArgs),
    Status(StatusArgs),
    Dump(DumpArgs),
    Report(ReportArgs),
    Flags(FlagsArgs),
    History(HistoryArgs),
    Export(ExportArgs),
    Paths(PathsArgs),
}

#[derive(FromArgs, Debug)]
/// Print where the tools keep their files: data, db or spool (all, as
/// name=path lines, without one).
#[argh(subcommand, name = "paths")]
pub struct PathsArgs {
    /// data, db or spool
    #[argh(positional)]
    pub name: Option<String>,
}

/// Declares the argument struct of a subcommand that reads jobs: its own
/// fields, then the five job filter flags (`--days`, `--since`, `--until`,
/// `--user`, `--partition`), written once here since argh cannot flatten
/// one struct into another. Each such struct also gets `filter()`, its
/// flags as a [`JobFilter`]. The own fields are passed through as written
/// (token trees, so that argh sees `Option<...>` and `bool` as such) and
/// must end with a comma.
macro_rules! with_job_filters {
    (
        $(#[$($attr:tt)*])*
        pub struct $name:ident { $($fields:tt)* }
    ) => {
        $(#[$($attr)*])*
        pub struct $name {
            $($fields)*

            /// jobs that ended in the last N days
            #[argh(option)]
            pub days: Option<u32>,

            /// jobs that ended on or after this date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS, UTC)
            #[argh(option)]
            pub since: Option<String>,

            /// jobs that ended before this date
            #[argh(option)]
            pub until: Option<String>,

            /// only this user's jobs
            #[argh(option)]
            pub user: Option<String>,

            /// only this partition's jobs
            #[argh(option)]
            pub partition: Option<String>,
        }

        impl $name {
            /// The jobs the filter flags select.
            pub fn filter(&self) -> Result<JobFilter> {
                filter(
                    self.user.clone(),
                    self.partition.clone(),
                    self.since.as_deref(),
                    self.until.as_deref(),
                    self.days,
                )
            }
        }
    };
}

with_job_filters! {
    #[derive(FromArgs, Debug)]
    /// Efficiency report: jobs, CPU, memory and GPU hours, efficiencies and
    /// waste, by user, account, group, partition, node, state or tool.
    #[argh(subcommand, name = "report")]
    pub struct ReportArgs {
        /// group by: user, account, group, partition, node, state, tool (default user)
        #[argh(option, default = "String::from(\"user\")")]
        pub by: String,

        /// output: table, csv, ndjson, md (default table)
        #[argh(option, default = "String::from(\"table\")")]
        pub format: String,

        /// user-to-group mapping file (default $HPC_SIZER_GROUPS, else $XDG_CONFIG_HOME/hpc-sizer/groups)
        #[argh(option)]
        pub groups: Option<PathBuf>,

        /// read a Parquet dataset written by export instead of the database
        #[argh(option)]
        pub parquet: Option<PathBuf>,
    }
}

with_job_filters! {
    #[derive(FromArgs, Debug)]
    /// Flag counts and the flagged jobs.
    #[argh(subcommand, name = "flags")]
    pub struct FlagsArgs {
        /// output: table, csv, ndjson, md (default table)
        #[argh(option, default = "String::from(\"table\")")]
        pub format: String,

        /// list the flagged jobs, not only the counts
        #[argh(switch)]
        pub jobs: bool,
    }
}

with_job_filters! {
    #[derive(FromArgs, Debug)]
    /// Per-tool distribution of peak memory, CPU efficiency and elapsed time.
    #[argh(subcommand, name = "history")]
    pub struct HistoryArgs {
        /// the tool (from analysis records, else the job name)
        #[argh(option)]
        pub tool: String,

        /// output: table, csv, ndjson, md (default table)
        #[argh(option, default = "String::from(\"table\")")]
        pub format: String,
    }
}

with_job_filters! {
    #[derive(FromArgs, Debug)]
    /// Write the jobs as date-partitioned Parquet (end_date=YYYY-MM-DD/).
    #[argh(subcommand, name = "export")]
    pub struct ExportArgs {
        /// the dataset folder
        #[argh(option)]
        pub parquet: PathBuf,
    }
}

#[derive(FromArgs, Debug)]
/// Store NDJSON records (job, summary, flag, sample, meta, ...) from stdin,
/// files, or a spool folder.
#[argh(subcommand, name = "put")]
pub struct PutArgs {
    /// load every finished *.ndjson file of this folder and move it to DIR/done/
    #[argh(option)]
    pub spool: Option<PathBuf>,

    /// seconds a spool file whose last line is incomplete is left to its
    /// writer before it is loaded anyway (default 600)
    #[argh(option, default = "600")]
    pub settle: u64,

    /// stop at the first bad line
    #[argh(switch)]
    pub strict: bool,

    /// NDJSON files (default: stdin; '-' is stdin)
    #[argh(positional)]
    pub files: Vec<String>,
}

#[derive(FromArgs, Debug)]
/// Show job counts, date range, MaxRSS coverage, last ingest and size.
#[argh(subcommand, name = "status")]
pub struct StatusArgs {}

with_job_filters! {
    #[derive(FromArgs, Debug)]
    /// Write stored records as NDJSON.
    #[argh(subcommand, name = "dump")]
    pub struct DumpArgs {
        /// kinds to write, comma-separated: job, summary, flag, sample, analysis, rec, or other (every record kept whole: meta, analysis, rec and unknown kinds); default job
        #[argh(option, default = "String::from(\"job\")")]
        pub kind: String,

        /// only jobs of this tool (from their analysis record, else the job name)
        #[argh(option)]
        pub tool: Option<String>,

        /// only the latest N of the jobs selected (by end time)
        #[argh(option)]
        pub limit: Option<u64>,
    }
}

/// Builds the job filter shared by the reading commands.
pub fn filter(
    user: Option<String>,
    partition: Option<String>,
    since: Option<&str>,
    until: Option<&str>,
    days: Option<u32>,
) -> Result<JobFilter> {
    let date = |s: &str| slurm::parse_date(s).map_err(Error::Usage);
    let mut since = since.map(date).transpose()?;
    if let Some(d) = days {
        let from = hpc_db::now_epoch() - i64::from(d) * 86400;
        since = Some(since.map_or(from, |s| s.max(from)));
    }
    Ok(JobFilter {
        user,
        partition,
        since,
        until: until.map(date).transpose()?,
        ..JobFilter::default()
    })
}

/// The whole tool: runs one subcommand.
pub fn main_with(args: Args) -> Result<()> {
    let path = paths::db_path(args.db.as_deref());
    match args.cmd {
        Cmd::Put(p) => put(&path, p),
        Cmd::Status(_) => {
            let store = existing(&path)?;
            let mut out = io::BufWriter::new(io::stdout().lock());
            status(&store, &path, &mut out)?;
            Ok(out.flush()?)
        }
        Cmd::Dump(d) => {
            let kinds = dump_kinds(&d.kind)?;
            let f = JobFilter {
                tool: d.tool.clone(),
                limit: d.limit,
                ..d.filter()?
            };
            let store = existing(&path)?;
            let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
            dump(&store, &kinds, &f, &mut out)?;
            Ok(())
        }
        Cmd::Report(r) => report_cmd(&path, r),
        Cmd::Flags(a) => {
            let format: Format = a.format.parse().map_err(Error::Usage)?;
            let f = a.filter()?;
            let mut out = io::BufWriter::new(io::stdout().lock());
            Ok(store_flags(
                &existing(&path)?,
                &f,
                a.jobs,
                format,
                &mut out,
            )?)
        }
        Cmd::History(h) => {
            let format: Format = h.format.parse().map_err(Error::Usage)?;
            let f = h.filter()?;
            let mut out = io::BufWriter::new(io::stdout().lock());
            Ok(history(&existing(&path)?, &h.tool, &f, format, &mut out)?)
        }
        Cmd::Export(e) => {
            let f = e.filter()?;
            export(&existing(&path)?, &e.parquet, &f)
        }
        Cmd::Paths(a) => {
            let all = [
                ("data", paths::data_dir()),
                ("db", path),
                ("spool", paths::spool_dir(None)),
            ];
            let mut out = io::BufWriter::new(io::stdout().lock());
            match a.name.as_deref() {
                None => {
                    for (name, p) in &all {
                        writeln!(out, "{name}={}", p.display())?;
                    }
                }
                Some(name) => {
                    let (_, p) = all.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                        Error::Usage(format!("paths {}: data, db or spool", paths::escaped(name)))
                    })?;
                    writeln!(out, "{}", p.display())?;
                }
            }
            Ok(out.flush()?)
        }
    }
}

/// `put`: files (or stdin) or a spool folder into the database at `path`.
fn put(path: &Path, p: PutArgs) -> Result<()> {
    if p.spool.is_some() && !p.files.is_empty() {
        return Err(Error::Usage("put takes --spool or files, not both".into()));
    }
    let inputs = Inputs::new(p.files)?;
    let mut store = Store::open(path)?;
    let mut rejects = Rejects::new("hpc-store");
    rejects.strict = p.strict;
    let rep = match &p.spool {
        Some(dir) => {
            let opts = SpoolOptions { settle_s: p.settle };
            put_spool(&mut store, dir, opts, &mut rejects)?
        }
        None => {
            let mut total = PutReport::default();
            inputs.for_each(io::stdin().lock(), |input| {
                total += put_reader(&mut store, input, &mut rejects)?;
                Ok(())
            })?;
            total
        }
    };
    let spool = match p.spool {
        Some(_) => format!(
            " in {} spool files ({} left for later, {} left alone)",
            rep.files, rep.waiting, rep.skipped
        ),
        None => String::new(),
    };
    hpc_core::note!(
        "hpc-store: {} jobs, {} other records from {} lines{spool} into {}; {} rejected",
        rep.written.jobs,
        rep.written.others,
        rep.lines,
        paths::shown(path),
        rejects.rejected
    );
    rejects.finish(rep.lines)?;
    if rep.skipped > 0 {
        return Err(Error::Other(format!(
            "{} spool files could not be loaded (see above); they stay in the spool",
            rep.skipped
        )));
    }
    Ok(())
}

/// `report`: the efficiency report from the database at `path` or a
/// Parquet dataset.
fn report_cmd(path: &Path, r: ReportArgs) -> Result<()> {
    let by: By = r.by.parse().map_err(Error::Usage)?;
    let format: Format = r.format.parse().map_err(Error::Usage)?;
    let f = r.filter()?;
    let groups = match paths::groups_path(r.groups.as_deref()) {
        // A bad mapping file is a usage error, like a bad --config.
        Some(p) if by == By::Group => {
            report::read_groups(&p).map_err(|e| Error::Usage(e.to_string()))?
        }
        _ => report::Groups::new(),
    };
    let raw = match &r.parquet {
        Some(dir) => parquet_rows(dir, by, &f)?,
        None => report::sqlite_rows(&existing(path)?, by, &f)?,
    };
    let (rows, unsplit) = report::finish(by, raw, &groups);
    let mut out = io::BufWriter::new(io::stdout().lock());
    report::write(&mut out, by, &rows, format)?;
    out.flush()?;
    if unsplit > 0 {
        return Err(Error::Other(format!(
            "{unsplit} node lists could not be read (see above); their jobs are counted under '{}'",
            report::BAD_NODE_KEY
        )));
    }
    Ok(())
}

/// Opens the database, which must exist, for reading only.
fn existing(path: &std::path::Path) -> Result<Store> {
    Ok(Store::open_read(path)?)
}

/// The `--kind` list of dump: known kinds, each once, in the order given.
fn dump_kinds(list: &str) -> Result<Vec<String>> {
    let mut kinds: Vec<String> = Vec::new();
    for k in list.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if !DUMP_KINDS.contains(&k) {
            return Err(Error::Usage(format!(
                "unknown kind '{}' (one of {})",
                paths::escaped(k),
                DUMP_KINDS.join(", ")
            )));
        }
        if !kinds.iter().any(|have| have == k) {
            kinds.push(k.to_string());
        }
    }
    if kinds.is_empty() {
        return Err(Error::Usage(format!(
            "--kind names no kind (one or more of {}, comma-separated)",
            DUMP_KINDS.join(", ")
        )));
    }
    Ok(kinds)
}

/// The group mapping file: the flag, else $HPC_SIZER_GROUPS, else the
/// config folder's `groups` when it exists.
#[cfg(feature = "parquet")]
fn parquet_rows(dir: &std::path::Path, by: By, f: &JobFilter) -> Result<Vec<report::RawRow>> {
    crate::parquet::parquet_rows(dir, by, f)
}

#[cfg(not(feature = "parquet"))]
fn parquet_rows(_: &std::path::Path, _: By, _: &JobFilter) -> Result<Vec<report::RawRow>> {
    Err(Error::Usage(
        "this hpc-store was built without the parquet feature".into(),
    ))
}

#[cfg(feature = "parquet")]
fn export(store: &Store, dir: &std::path::Path, f: &JobFilter) -> Result<()> {
    let t = std::time::Instant::now();
    let st = crate::parquet::export(store, dir, f)?;
    hpc_core::note!(
        "hpc-store: exported {} jobs in {} partitions ({:.1} MiB) to {} in {:.2} s",
        st.jobs,
        st.partitions,
        st.bytes as f64 / 1048576.0,
        paths::shown(dir),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn export(_: &Store, _: &std::path::Path, _: &JobFilter) -> Result<()> {
    Err(Error::Usage(
        "this hpc-store was built without the parquet feature".into(),
    ))
}
