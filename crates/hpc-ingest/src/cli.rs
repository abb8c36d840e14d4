//! The command line of hpc-ingest: flags, defaults and wiring.

use std::io::{self, Write};
use std::path::PathBuf;

use argh::FromArgs;
use hpc_core::input::Inputs;
use hpc_core::slurm::Zone;
use hpc_core::{paths, Error, Result};
use hpc_db::Store;

use crate::sacct::{ParseOpts, SACCT_FIELDS};
use crate::{report, run, Opts, Sink};

#[derive(FromArgs, Debug)]
/// Read `sacct --parsable2` text and keep every job: merged steps, MaxRSS,
/// TotalCPU, efficiencies and waste, in the history database (default) or
/// as NDJSON job records on stdout.
#[argh(
    example = "sacct -a -P -S 2026-01-01 -o $(hpc-ingest --sacct-format) | hpc-ingest",
    example = "sacct -P -j 42 -o $(hpc-ingest --sacct-format) | hpc-ingest --ndjson | hpc-flags",
    example = "hpc-ingest --delimiter '^|^' --fields JobID,State,Elapsed old.txt",
    note = "The database is --db, else $HPC_SIZER_DB, else $XDG_DATA_HOME/hpc-sizer/hpc-sizer.db.",
    note = "Exit status: 0 success, 1 some lines rejected or a failure, 2 usage error."
)]
pub struct Args {
    /// print the sacct -o field list hpc-ingest reads, and exit
    #[argh(switch)]
    pub sacct_format: bool,

    /// write NDJSON job records to stdout instead of the database
    #[argh(switch)]
    pub ndjson: bool,

    /// the database file (overrides HPC_SIZER_DB)
    #[argh(option)]
    pub db: Option<PathBuf>,

    /// comma-separated column names when the input has no header line
    #[argh(option)]
    pub fields: Option<String>,

    /// the field delimiter (default '|'; reportseff streams use '^|^')
    #[argh(option, default = "String::from(\"|\")")]
    pub delimiter: String,

    /// the cluster name for inputs without a Cluster column (default: default)
    #[argh(option, default = "String::from(\"default\")")]
    pub cluster: String,

    /// read sacct times as UTC instead of local time
    #[argh(switch)]
    pub utc: bool,

    /// jobs per database transaction (default 50000)
    #[argh(option, default = "50000")]
    pub batch: usize,

    /// stop at the first bad line
    #[argh(switch)]
    pub strict: bool,

    /// sacct text files to read (default: stdin; '-' is stdin)
    #[argh(positional)]
    pub files: Vec<String>,
}

/// The checked options of a run.
fn opts_of(args: &Args) -> Result<Opts> {
    if args.delimiter.is_empty() {
        return Err(Error::Usage("--delimiter must not be empty".into()));
    }
    if args.batch == 0 {
        return Err(Error::Usage("--batch must be at least 1".into()));
    }
    if args.ndjson && args.db.is_some() {
        return Err(Error::Usage("--ndjson and --db exclude each other".into()));
    }
    let fields = args.fields.as_ref().map(|f| {
        f.split([',', '|'])
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
    });
    Ok(Opts {
        fields,
        delimiter: args.delimiter.clone(),
        parse: ParseOpts {
            cluster: args.cluster.clone(),
            zone: if args.utc {
                Zone::utc()
            } else {
                Zone::system().map_err(Error::Usage)?
            },
        },
        strict: args.strict,
    })
}

/// The whole tool: checks the flags and runs.
pub fn main_with(args: Args) -> Result<()> {
    if args.sacct_format {
        let mut out = io::stdout().lock();
        writeln!(out, "{}", SACCT_FIELDS.join(","))?;
        return Ok(out.flush()?);
    }
    let opts = opts_of(&args)?;
    let inputs = Inputs::new(args.files.clone())?;
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {human_pos} lines {per_sec} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let mut progress = |n: u64| bar.set_position(n);
    let (stats, target) = if args.ndjson {
        let stdout = io::stdout();
        let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
        let sink = &mut Sink::Ndjson(&mut out);
        let stats = run(&opts, &inputs, io::stdin().lock(), sink, &mut progress)?;
        (stats, "to stdout".to_string())
    } else {
        let path = paths::db_path(args.db.as_deref());
        let mut store = Store::open(&path)?;
        let stats = run(
            &opts,
            &inputs,
            io::stdin().lock(),
            &mut Sink::Store {
                store: &mut store,
                batch: args.batch,
            },
            &mut progress,
        )?;
        store.set_mark("last_ingest", &format!("{} jobs", stats.jobs))?;
        (stats, format!("into {}", paths::shown(&path)))
    };
    bar.finish_and_clear();
    // The counts are news, not the result: a stderr that cannot be written
    // (2>/dev/full) does not fail a run whose exit status already tells.
    let _ = report(&mut io::stderr().lock(), &stats, &target);
    if stats.rejected > 0 {
        return Err(Error::Rejected {
            rejected: stats.rejected,
            total: stats.lines,
        });
    }
    Ok(())
}
