//! The `job` subcommand: picks the job, lays it out for the format, and
//! draws it as PNG, SVG ([`crate::draw`]) or Unicode sparklines for a
//! terminal ([`crate::spark`]).

use std::io::Write;

use hpc_core::slurm::Timestamp;
use hpc_core::{Error, Result};

use crate::draw::{self, short_duration};
use crate::panels::{plan, JobPlot};
use crate::spark::sparklines;
use crate::stream::Stream;
use crate::Format;

/// What `job` draws.
#[derive(Debug, Clone)]
pub struct JobOpts {
    /// The job id (default: the stream's first).
    pub job: Option<String>,
    /// Pixels (images) or characters (text).
    pub width: Option<u32>,
    /// The format.
    pub format: Format,
}

/// The job `want` of the stream, else its first job with samples.
pub fn pick_job<'a>(stream: &'a Stream, want: Option<&str>) -> Result<&'a str> {
    match want {
        Some(id) => stream
            .series
            .get_key_value(id)
            .map(|(k, _)| k.as_str())
            .ok_or_else(|| {
                Error::Other(format!(
                    "no samples of job {}",
                    hpc_core::paths::escaped(id)
                ))
            }),
        None => stream
            .series_order
            .iter()
            .find(|id| stream.series[*id].span().is_some())
            .map(String::as_str)
            .ok_or_else(|| Error::Other("no samples in the input".into())),
    }
}

/// The title line of a job plot.
pub fn title(plot: &JobPlot, samples: usize) -> String {
    let start = Timestamp {
        epoch: plot.t0 as i64,
    }
    .to_rfc3339();
    // Control characters are escaped: raw, they are not well-formed XML
    // (an SVG a browser refuses) and reach a terminal in the text format.
    let id = if plot.job_id.is_empty() {
        "(no id)".to_string()
    } else {
        hpc_core::paths::escaped(&plot.job_id)
    };
    format!(
        "job {id}: from {start}, {}, {samples} samples",
        short_duration(plot.t1 - plot.t0)
    )
}

/// Draws the job chosen by `opts` in `opts.format` to `out`.
pub fn write_job(out: &mut dyn Write, stream: &Stream, opts: &JobOpts) -> Result<()> {
    let id = pick_job(stream, opts.job.as_deref())?;
    let samples = stream.series[id]
        .all()
        .map(|s| s.t.len())
        .max()
        .unwrap_or(0);
    match opts.format {
        Format::Txt => {
            let width = opts.width.unwrap_or(72).clamp(10, 10_000) as usize;
            let plot = plan(stream, id, width).ok_or_else(|| Error::Other("no samples".into()))?;
            out.write_all(sparklines(&plot, &title(&plot, samples)).as_bytes())?;
        }
        Format::Png | Format::Svg => {
            let width = opts.width.unwrap_or(1200).clamp(300, 20_000);
            let plot = plan(stream, id, draw::job_columns(width))
                .ok_or_else(|| Error::Other("no samples".into()))?;
            let head = title(&plot, samples);
            let size = draw::job_size(width);
            if opts.format == Format::Png {
                let (rgb, _) = draw::bitmap(size, |root| draw::draw_job(root, &plot, &head))?;
                draw::write_png(out, &rgb, size)?;
            } else {
                let (svg, _) = draw::svg(size, |root| draw::draw_job(root, &plot, &head))?;
                out.write_all(svg.as_bytes())?;
            }
        }
    }
    Ok(())
}
