//! hpc-merge: joins the per-node sample files of one job into one aggregate
//! sample series on a common time grid, a job-wide summary with node
//! imbalance, and one summary per node.
//!
//! - [`Args`] is what argh parses; [`Opts`] is the checked form `run` takes.
//! - [`run`] reads the inputs (files, folders of `*.ndjson`, or stdin; or
//!   sh5util CSV), bins every node's samples on the grid as they stream
//!   (files in parallel, each read once), combines the nodes and writes
//!   NDJSON.
//!
//! Memory follows the length of the grid, not the number of samples: a
//! node's raw samples are never kept, only its bins, and a finished node is
//! folded into the job-wide sums and dropped.

mod bins;
mod combine;
mod fast;
mod fields;
mod gpus;
mod input;
mod pool;
mod sh5util;

use std::io::{BufRead, Write};
use std::path::Path;

use argh::FromArgs;
use hpc_core::input::{Input, Inputs, STDIN};
use hpc_core::ndjson::Rejects;
use hpc_core::{Error, Result};

use crate::combine::Combiner;
use crate::input::StreamResult;

/// Merge per-node hpc-probe sample files into one job series and summaries.
#[derive(FromArgs, Debug)]
#[argh(
    example = "hpc-merge spool/42/*.ndjson > job42.ndjson",
    example = "hpc-merge --nodes n1,n2,n3 spool/42 | hpc-flags | hpc-store put",
    example = "hpc-merge --from sh5util --step 0 --job-id 17 extract_17_tasks_ts.csv",
    note = "Exit status: 0 ok, 1 bad data or failure, 2 usage error. See hpc-merge(1)."
)]
pub struct Args {
    /// grid step in seconds (default: the largest median sampling interval
    /// among nodes, rounded, at least 1)
    #[argh(option)]
    pub grid: Option<f64>,
    /// hold a node's last value over gaps of at most this many of its
    /// sampling intervals (default 3)
    #[argh(option, default = "3.0")]
    pub max_gap: f64,
    /// allocated CPUs of the whole job, for cpu_frac (default: the sum of
    /// the metas' req_cpus)
    #[argh(option)]
    pub cpus: Option<u32>,
    /// the expected nodes, comma-separated (missing ones are reported)
    #[argh(option)]
    pub nodes: Option<String>,
    /// the expected number of nodes (default: the metas' nnodes)
    #[argh(option)]
    pub expect_nodes: Option<u32>,
    /// merge only job ID: metas and samples of other jobs are skipped
    /// (without it, inputs that name two jobs are refused)
    #[argh(option)]
    pub job: Option<String>,
    /// the job id to write (default: --job, else the metas', else the
    /// samples')
    #[argh(option)]
    pub job_id: Option<String>,
    /// where the merged series is kept, written into the summary's series
    #[argh(option)]
    pub series_path: Option<String>,
    /// input format: ndjson (default) or sh5util
    #[argh(option, default = "String::from(\"ndjson\")")]
    pub from: String,
    /// with --from sh5util: only this step (`0`, `17.0`, `batch`)
    #[argh(option)]
    pub step: Option<String>,
    /// reader threads (default: the number of CPUs, at most the files)
    #[argh(option)]
    pub threads: Option<usize>,
    /// node files, folders of *.ndjson files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// hpc-probe NDJSON.
    Ndjson,
    /// `sh5util -E --series=Tasks --level=Node:TimeSeries` CSV.
    Sh5util,
}

/// The most nodes a job may have (`--expect-nodes`, a meta's `nnodes`):
/// more than the largest clusters have. (`--nodes` is bounded by the
/// kernel's limit on one argument, 128 KiB.)
pub const MAX_NODES: usize = 200_000;

/// The finest `--grid`, seconds.
pub const MIN_GRID_S: f64 = 0.001;

/// The coarsest `--grid`, seconds (a day).
pub const MAX_GRID_S: f64 = 86_400.0;

/// The checked options.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Fixed grid step, seconds.
    pub grid: Option<f64>,
    /// Longest gap (in sampling intervals) a value is held over.
    pub max_gap: f64,
    /// Allocated CPUs of the job.
    pub cpus: Option<u32>,
    /// Expected node names.
    pub nodes: Vec<String>,
    /// Expected node count.
    pub expect_nodes: Option<u32>,
    /// Only this job's records are merged.
    pub job: Option<String>,
    /// Job id override.
    pub job_id: Option<String>,
    /// The summary's `series`.
    pub series_path: Option<String>,
    /// Input format.
    pub from: Format,
    /// sh5util step filter.
    pub step: Option<String>,
    /// Reader threads.
    pub threads: usize,
    /// Input files (expanded from folders), or stdin.
    pub inputs: Inputs,
}

impl Opts {
    /// Checks `args` and expands folders into their `*.ndjson` files.
    pub fn from_args(args: Args) -> Result<Opts> {
        check_numbers(&args)?;
        if args.job.as_deref() == Some("") {
            return Err(Error::Usage("--job: give a job id".into()));
        }
        let from = match args.from.as_str() {
            "ndjson" => Format::Ndjson,
            "sh5util" => Format::Sh5util,
            other => {
                return Err(Error::Usage(format!(
                    "--from {other}: expected ndjson or sh5util"
                )))
            }
        };
        if args.step.is_some() && from != Format::Sh5util {
            return Err(Error::Usage("--step goes with --from sh5util".into()));
        }
        let nodes: Vec<String> = args
            .nodes
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let inputs = Inputs::new(expand_folders(&args.inputs)?)?;
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let threads = args.threads.unwrap_or(cpus).max(1);
        Ok(Opts {
            grid: args.grid,
            max_gap: args.max_gap,
            cpus: args.cpus,
            nodes,
            expect_nodes: args.expect_nodes,
            job_id: args.job_id.or_else(|| args.job.clone()),
            job: args.job,
            series_path: args.series_path,
            from,
            step: args.step,
            threads,
            inputs,
        })
    }
}

/// Checks the numeric flags: `--grid`, `--expect-nodes`, `--max-gap`,
/// `--cpus`.
fn check_numbers(args: &Args) -> Result<()> {
    if let Some(g) = args.grid {
        if !(MIN_GRID_S..=MAX_GRID_S).contains(&g) {
            return Err(Error::Usage(format!(
                "--grid {g}: must be from {MIN_GRID_S} to {MAX_GRID_S} seconds"
            )));
        }
    }
    if args.expect_nodes.is_some_and(|n| n as usize > MAX_NODES) {
        return Err(Error::Usage(format!(
            "--expect-nodes {}: at most {MAX_NODES}",
            args.expect_nodes.unwrap_or_default()
        )));
    }
    if !(args.max_gap.is_finite() && args.max_gap >= 0.0) {
        return Err(Error::Usage(format!(
            "--max-gap {}: must be 0 or more",
            args.max_gap
        )));
    }
    if args.cpus == Some(0) {
        return Err(Error::Usage("--cpus 0: must be at least 1".into()));
    }
    Ok(())
}

/// The inputs with each folder replaced by its `*.ndjson` files, sorted.
fn expand_folders(names: &[String]) -> Result<Vec<String>> {
    let mut inputs = Vec::new();
    for i in names {
        let p = Path::new(i);
        if i == STDIN || !p.is_dir() {
            inputs.push(i.clone());
            continue;
        }
        let mut found: Vec<String> = std::fs::read_dir(p)
            .map_err(|source| Error::Io {
                context: format!("cannot list {}", hpc_core::paths::shown(p)),
                source,
            })?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "ndjson"))
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        found.sort();
        inputs.extend(found);
    }
    Ok(inputs)
}

/// What a run did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stats {
    /// Input lines read.
    pub lines: u64,
    /// Lines rejected.
    pub rejected: u64,
    /// Aggregate samples written.
    pub samples_out: u64,
    /// Nodes merged.
    pub nodes: usize,
}

/// Reads one input: `stdin` when `name` is `-`.
fn read_one(
    opts: &Opts,
    index: usize,
    name: &str,
    stdin: &mut dyn BufRead,
    step: f64,
) -> Result<StreamResult> {
    let input = match name {
        STDIN => Input::new(STDIN, stdin),
        _ => Input::open(name)?,
    };
    match opts.from {
        Format::Ndjson => input::read_stream(index, input, step, opts.job.as_deref()),
        Format::Sh5util => {
            let name = input.name().to_owned();
            let step_filter = opts.step.as_deref();
            sh5util::read_sh5util(index, &name, input.into_reader(), step, step_filter)
        }
    }
}

/// The job's earliest start, when every input is a file that opens with a
/// meta whose start is a plausible time and all lie within the sanity window
/// of one another (else it is found after reading, from the nodes' data).
fn origin_of(opts: &Opts, names: &[String]) -> Option<f64> {
    if opts.from != Format::Ndjson {
        return None;
    }
    let mut starts = names.iter().map(|n| match n.as_str() {
        "-" => None,
        _ => input::peek_meta_start(n).filter(|s| s.is_finite() && s.abs() <= bins::MAX_T),
    });
    let first = starts.next()??;
    let (mut lo, mut hi) = (first, first);
    for s in starts {
        let s = s?;
        (lo, hi) = (lo.min(s), hi.max(s));
    }
    (hi - lo <= bins::MAX_SPAN_S).then_some(lo)
}

/// Refuses inputs that name different jobs: the job most inputs name is
/// the job; the first input that names another is reported.
fn one_job(names: &[String], jobs: &mut [(usize, Option<(String, u64)>)]) -> Result<()> {
    // In input order, whatever order the reader threads finished in.
    jobs.sort_by_key(|j| j.0);
    let mut count: Vec<(&str, usize, usize, u64)> = Vec::new(); // job, inputs, first input, line
    for (i, job) in jobs.iter() {
        if let Some((j, line)) = job {
            match count.iter_mut().find(|c| c.0 == j) {
                Some(c) => c.1 += 1,
                None => count.push((j, 1, *i, *line)),
            }
        }
    }
    if count.len() < 2 {
        return Ok(());
    }
    // The most named job (the first named on a tie), then the first other.
    let main = count
        .iter()
        .enumerate()
        .max_by_key(|(k, c)| (c.1, std::cmp::Reverse(*k)))
        .map(|(_, c)| *c)
        .unwrap_or(count[0]);
    let odd = count
        .iter()
        .filter(|c| c.0 != main.0)
        .min_by_key(|c| c.2)
        .unwrap_or(&count[1]);
    let name = |i: usize| hpc_core::paths::shown(Path::new(&names[i]));
    let job = hpc_core::paths::escaped;
    Err(Error::Other(format!(
        "{}: line {}: job {}, but {}: line {} is job {}: records of two jobs are not merged \
         (give --job ID to merge one of them)",
        name(odd.2),
        odd.3,
        job(odd.0),
        name(main.2),
        main.3,
        job(main.0)
    )))
}

/// Merges the inputs named in `opts` (or `stdin`) and writes the aggregate
/// samples, pass-through records and summaries to `out`.
pub fn run(opts: &Opts, mut stdin: impl BufRead, out: impl Write) -> Result<Stats> {
    // The bin step: the grid when given, else 1 s (coarsened at the end).
    let step = opts.grid.unwrap_or(1.0);
    let names = opts.inputs.names();
    // The job's earliest start is known up front when every input opens
    // with a meta; then nodes are folded as soon as they are read.
    let origin = origin_of(opts, names);
    let hosts = combine::Hosts::new(names);
    let mut comb = Combiner::new(opts, &hosts, step, origin);
    let mut got = Gathered::default();
    let threads = opts.threads.min(names.len()).max(1);
    if threads == 1 || opts.inputs.reads_stdin() {
        for (i, n) in names.iter().enumerate() {
            let r = read_one(opts, i, n, &mut stdin, step)?;
            got.take(r, &mut comb)?;
        }
    } else {
        let reader = pool::Reader {
            opts,
            names,
            hosts: &hosts,
            step,
            origin,
        };
        let early = origin.is_some();
        pool::read_all(&reader, threads, |msg| got.handle(msg, early, &mut comb))?;
    }
    one_job(names, &mut got.jobs)?;
    got.write(comb, out)
}

/// What the inputs gave besides their nodes, gathered as they are read.
#[derive(Default)]
struct Gathered {
    /// Pass-through lines, by input index.
    passthrough: Vec<(usize, Vec<String>)>,
    /// The job each input names, by input index, with its first line.
    jobs: Vec<(usize, Option<(String, u64)>)>,
    lines: u64,
    rejected: u64,
}

impl Gathered {
    /// Writes the pass-through lines, then the merged series and summaries.
    fn write(mut self, mut comb: Combiner, out: impl Write) -> Result<Stats> {
        self.passthrough.sort_by_key(|(i, _)| *i);
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        for (_, ls) in &self.passthrough {
            for l in ls {
                comb.note_passthrough(l);
                out.write_all(l.as_bytes())?;
                out.write_all(b"\n")?;
            }
        }
        let (samples_out, nodes) = comb.finish(&mut out)?;
        out.flush()?;
        let mut rej = Rejects::new("hpc-merge");
        rej.rejected = self.rejected;
        rej.finish(self.lines)?;
        Ok(Stats {
            lines: self.lines,
            rejected: self.rejected,
            samples_out,
            nodes,
        })
    }

    /// Takes one input's result; its nodes go to `comb`.
    fn take(&mut self, r: StreamResult, comb: &mut Combiner) -> Result<()> {
        self.lines += r.lines;
        self.rejected += r.rejected;
        self.jobs.push((r.index, r.job));
        if !r.passthrough.is_empty() {
            self.passthrough.push((r.index, r.passthrough));
        }
        for n in r.nodes {
            comb.add_node(n, r.index)?;
        }
        Ok(())
    }

    /// Takes a reader thread's message; `early`: the threads fold the
    /// nodes they read (the job's start was known before reading).
    fn handle(&mut self, msg: pool::Msg, early: bool, comb: &mut Combiner) -> Result<()> {
        match msg {
            pool::Msg::Read(r, folded) if early => {
                for n in &r.nodes {
                    comb.note(n);
                }
                for (stat, median) in folded {
                    comb.add_folded(stat, median);
                }
                let r = StreamResult {
                    nodes: Vec::new(),
                    ..r
                };
                self.take(r, comb)
            }
            pool::Msg::Read(r, _) => self.take(r, comb),
            pool::Msg::Sums(a) => comb.merge_agg(&a),
            pool::Msg::Failed(e) => Err(e),
        }
    }
}

/// The whole tool: parse-checked arguments, stdin, stdout.
pub fn main_with(args: Args) -> Result<Stats> {
    let opts = Opts::from_args(args)?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    run(&opts, stdin.lock(), stdout.lock())
}
