//! The `job` subcommand: picks the job, lays it out for the format, and
//! draws it as PNG, SVG or Unicode sparklines for a terminal.

use std::fmt::Write as _;
use std::io::Write;

use hpc_core::slurm::Timestamp;
use hpc_core::{Error, Result};

use crate::draw::{self, short_duration, short_value};
use crate::panels::{plan, JobPlot, Panel};
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
    let id = if plot.job_id.is_empty() {
        "(no id)"
    } else {
        &plot.job_id
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

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One job-wide line of a panel as sparkline characters (each column's
/// maximum, so a spike stays).
fn spark_row(p: &Panel, trace: usize) -> String {
    let Some(line) = p
        .lines
        .iter()
        .rfind(|l| l.host.is_none() && l.trace == trace)
    else {
        return String::new();
    };
    line.bins
        .iter()
        .map(|b| match b {
            None => ' ',
            Some(b) => {
                let r = (f64::from(b.max) / p.y_max).clamp(0.0, 1.0);
                BARS[((r * 8.0) as usize).min(7)]
            }
        })
        .collect()
}

/// The panels of `plot` as text.
pub fn sparklines(plot: &JobPlot, title: &str) -> String {
    let mut s = format!("{title}\n");
    for p in &plot.panels {
        for (i, tr) in p.def.traces.iter().enumerate() {
            let name = if p.def.traces.len() > 1 {
                format!("{} {}", p.def.title, tr.label)
            } else {
                p.def.title.to_string()
            };
            if !p.measured {
                let _ = writeln!(s, "{name:<28} not measured");
                continue;
            }
            let row = spark_row(p, i);
            let top = p.lines.iter().filter(|l| l.host.is_none() && l.trace == i);
            let max = top
                .flat_map(|l| l.bins.iter().flatten())
                .map(|b| b.max)
                .fold(f32::NAN, f32::max);
            let _ = write!(s, "{name:<28} {row} max {}", short_value(f64::from(max)));
            if let Some(r) = p.reference {
                let _ = write!(s, ", {} {}", p.def.reference_label, short_value(r));
            }
            s.push('\n');
        }
        let cols: Vec<usize> = p.marks.iter().filter_map(|m| m.col).collect();
        if !cols.is_empty() {
            let row: String = (0..plot.ncols)
                .map(|c| if cols.contains(&c) { '^' } else { ' ' })
                .collect();
            let _ = writeln!(s, "{:<28} {}", "", row.trim_end());
        }
        for m in &p.marks {
            let at = match m.col {
                Some(c) => format!(
                    "at {}",
                    short_duration((c as f64 + 0.5) / plot.ncols as f64 * (plot.t1 - plot.t0))
                ),
                None => "whole run".to_string(),
            };
            let _ = writeln!(s, "{:<28} flag {} ({at})", "", m.flag);
        }
    }
    s
}
