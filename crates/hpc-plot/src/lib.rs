//! hpc-plot: hpc-sizer records drawn for people.
//!
//! - `job`: one job's six panels ([`panels::PANELS`]) on one time axis, as
//!   PNG or SVG ([`draw`]) or Unicode sparklines ([`spark`]);
//! - `report`: bar charts of `hpc-store report --format ndjson` rows
//!   ([`report`]);
//! - `html`: a self-contained static HTML report, an index and one page per
//!   user ([`html`]);
//! - `mail`: one user's digest as an RFC 5322 message ([`mail`]);
//! - `backtest`: `hpc-model backtest` records of one replay, the policies'
//!   MAQ against under-share and the calibration ([`backtest`]).
//!
//! Input is read by [`input::read_records`] into a [`stream::Stream`].

pub mod backtest;
pub mod mail;

pub use hpc_render::{draw, html, input, job, panels, reduce, report, spark, stream, Format};

use std::io::Write;
use std::path::{Path, PathBuf};

use argh::FromArgs;
use hpc_core::ndjson::Rejects;
use hpc_core::paths::write_atomic;
use hpc_core::Result;

use crate::stream::Stream;

/// Draw hpc-sizer records: job plots, report charts, an HTML report, a mail digest, a backtest.
#[derive(FromArgs, Debug)]
#[argh(
    example = "hpc-merge spool/42/*.ndjson | hpc-flags | hpc-plot job -o job42.png",
    example = "hpc-plot job --format txt run.ndjson",
    example = "hpc-store report --format ndjson --by user | hpc-plot report -o users.svg",
    example = "(hpc-store report --format ndjson; hpc-store dump --kind job,flag,summary) | hpc-plot html --out report",
    example = "hpc-store dump --kind job,flag,other --user ann | hpc-plot mail --user ann | sendmail -t",
    example = "hpc-model backtest --format ndjson jobs.ndjson | hpc-plot backtest -o backtest.png",
    note = "Exit status: 0 ok, 1 bad data or failure, 2 usage error. See hpc-plot(1)."
)]
pub struct Args {
    /// what to draw
    #[argh(subcommand)]
    pub cmd: Cmd,
}

/// The subcommands.
#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum Cmd {
    /// `job`
    Job(JobArgs),
    /// `report`
    Report(ReportArgs),
    /// `html`
    Html(HtmlArgs),
    /// `mail`
    Mail(MailArgs),
    /// `backtest`
    Backtest(BacktestArgs),
}

/// Draw one job's six panels: memory, CPU, disk, threads, Lustre, NUMA.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "job")]
pub struct JobArgs {
    /// output file (.png, .svg or .txt), - for standard output (default)
    #[argh(option, short = 'o', default = "String::from(\"-\")")]
    pub out: String,
    /// png, svg or txt (default: from the output name's extension, else png for a file and txt for standard output)
    #[argh(option)]
    pub format: Option<String>,
    /// the job to draw when the stream holds several (default: the first with samples)
    #[argh(option)]
    pub job: Option<String>,
    /// width in pixels (default 1200; 300 to 20000) or, for txt, in characters (default 72)
    #[argh(option)]
    pub width: Option<u32>,
    /// input files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// Draw the rows of `hpc-store report --format ndjson` as bar charts.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "report")]
pub struct ReportArgs {
    /// output file (.png or .svg), - for standard output (default, SVG)
    #[argh(option, short = 'o', default = "String::from(\"-\")")]
    pub out: String,
    /// png or svg (default: from the output name, else svg)
    #[argh(option)]
    pub format: Option<String>,
    /// input files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// Write a static HTML report: an index and one page per user.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "html")]
pub struct HtmlArgs {
    /// the folder to write the pages into (created 0700)
    #[argh(option)]
    pub out: String,
    /// the report's title (default "hpc-sizer report")
    #[argh(option)]
    pub title: Option<String>,
    /// input files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// Print one user's digest as a mail (text and HTML) for sendmail -t.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "mail")]
pub struct MailArgs {
    /// the user whose jobs are told
    #[argh(option)]
    pub user: String,
    /// the To address (default: the user name)
    #[argh(option)]
    pub to: Option<String>,
    /// the From address (default: none, sendmail sets it)
    #[argh(option)]
    pub from: Option<String>,
    /// only jobs that ended at or after this UTC time (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)
    #[argh(option)]
    pub since: Option<String>,
    /// input files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// Draw `hpc-model backtest --format ndjson` records: MAQ against under-share, and the calibration.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "backtest")]
pub struct BacktestArgs {
    /// output file (.png or .svg), - for standard output (default, SVG)
    #[argh(option, short = 'o', default = "String::from(\"-\")")]
    pub out: String,
    /// png or svg (default: from the output name, else svg)
    #[argh(option)]
    pub format: Option<String>,
    /// input files, or - for stdin (default)
    #[argh(positional)]
    pub inputs: Vec<String>,
}

/// Reads the inputs into a stream; the rejects say whether lines were bad.
pub fn read_stream(inputs: &[String]) -> Result<(Stream, Rejects, u64)> {
    let mut stream = Stream::default();
    let mut rejects = Rejects::new("hpc-plot");
    let lines = input::read_records(inputs, &mut rejects, |text| stream.add(text))?;
    Ok((stream, rejects, lines))
}

/// Writes `bytes` to `out` (`-`: standard output; else atomically, 0600).
pub fn write_output(out: &str, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    if out == "-" {
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::new(stdout.lock());
        write(&mut w)?;
        w.flush()?;
        return Ok(());
    }
    write_atomic(&PathBuf::from(out), write)
}

/// Runs the parsed command line.
pub fn main_with(args: Args) -> Result<()> {
    let (rejects, lines) = match args.cmd {
        Cmd::Job(a) => {
            let default = if a.out == "-" {
                Format::Txt
            } else {
                Format::Png
            };
            let format = Format::pick(
                a.format.as_deref(),
                &a.out,
                default,
                &[Format::Png, Format::Svg, Format::Txt],
            )?;
            let (stream, rejects, lines) = read_stream(&a.inputs)?;
            let opts = job::JobOpts {
                job: a.job,
                width: a.width,
                format,
            };
            write_output(&a.out, |w| job::write_job(w, &stream, &opts))?;
            (rejects, lines)
        }
        Cmd::Report(a) => {
            let format = Format::pick(
                a.format.as_deref(),
                &a.out,
                Format::Svg,
                &[Format::Png, Format::Svg],
            )?;
            let (stream, rejects, lines) = read_stream(&a.inputs)?;
            write_output(&a.out, |w| report::write_report(w, &stream, format))?;
            (rejects, lines)
        }
        Cmd::Html(a) => {
            let (stream, rejects, lines) = read_stream(&a.inputs)?;
            let title = a.title.as_deref().unwrap_or("hpc-sizer report");
            html::write_site(Path::new(&a.out), &stream, title)?;
            (rejects, lines)
        }
        Cmd::Mail(a) => {
            let opts = mail::MailOpts::from_args(&a)?;
            let (stream, rejects, lines) = read_stream(&a.inputs)?;
            write_output("-", |w| mail::write_mail(w, &stream, &opts))?;
            (rejects, lines)
        }
        Cmd::Backtest(a) => {
            let format = Format::pick(
                a.format.as_deref(),
                &a.out,
                Format::Svg,
                &[Format::Png, Format::Svg],
            )?;
            let (stream, rejects, lines) = read_stream(&a.inputs)?;
            write_output(&a.out, |w| backtest::write_backtest(w, &stream, format))?;
            (rejects, lines)
        }
    };
    rejects.finish(lines)
}
