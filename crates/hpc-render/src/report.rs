//! Bar charts of report rows (`hpc-store report --format ndjson`): CPU
//! hours and memory GiB-hours with the wasted part stacked on the used part,
//! GPU hours, the efficiencies, and a histogram of the jobs' memory
//! efficiency when job records are in the stream.

use std::io::Write;

use hpc_core::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::{Map, Value};

use crate::draw::{self, register_font};
use crate::stream::Stream;
use crate::Format;

/// One report row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// The value of the report's key (`(none)` when absent).
    pub key: String,
    /// Jobs.
    pub jobs: f64,
    /// CPU hours reserved.
    pub cpu_h: f64,
    /// CPU hours wasted.
    pub cpu_wasted_h: f64,
    /// CPU efficiency, percent.
    pub cpu_eff: Option<f64>,
    /// Memory GiB-hours reserved.
    pub mem_gbh: f64,
    /// Memory GiB-hours wasted.
    pub mem_wasted_gbh: f64,
    /// Memory efficiency, percent.
    pub mem_eff: Option<f64>,
    /// GPU hours reserved.
    pub gpu_h: f64,
}

impl Row {
    /// Reads a report record: its `by` names the key field.
    pub fn from_map(m: &Map<String, Value>) -> (String, Row) {
        let by = m
            .get("by")
            .and_then(Value::as_str)
            .unwrap_or("key")
            .to_string();
        // Control characters escaped, as in a job's title (see
        // `job::title`).
        let key = match m.get(&by) {
            Some(Value::String(s)) => hpc_core::paths::escaped(s),
            Some(Value::Null) | None => "(none)".into(),
            Some(v) => v.to_string(),
        };
        let f = |k: &str| m.get(k).and_then(Value::as_f64);
        let row = Row {
            key,
            jobs: f("jobs").unwrap_or(0.0),
            cpu_h: f("cpu_h").unwrap_or(0.0),
            cpu_wasted_h: f("cpu_wasted_h").unwrap_or(0.0),
            cpu_eff: f("cpu_eff"),
            mem_gbh: f("mem_gbh").unwrap_or(0.0),
            mem_wasted_gbh: f("mem_wasted_gbh").unwrap_or(0.0),
            mem_eff: f("mem_eff"),
            gpu_h: f("gpu_h").unwrap_or(0.0),
        };
        (by, row)
    }
}

/// The report rows of a stream by their `by` key, in input order.
pub fn rows_by_key(stream: &Stream) -> Vec<(String, Vec<Row>)> {
    let mut out: Vec<(String, Vec<Row>)> = Vec::new();
    for m in &stream.reports {
        let (by, row) = Row::from_map(m);
        match out.iter_mut().find(|(b, _)| *b == by) {
            Some((_, rows)) => rows.push(row),
            None => out.push((by, vec![row])),
        }
    }
    out
}

/// At most this many bars a chart; the rest are counted in the title.
pub const MAX_BARS: usize = 30;

/// One bar chart: keys along x, stacked parts (label, colour, values).
pub struct Bars {
    /// The title.
    pub title: String,
    /// The bar names.
    pub keys: Vec<String>,
    /// The stacked parts, bottom first.
    pub parts: Vec<(&'static str, RGBColor, Vec<f64>)>,
}

const USED: RGBColor = RGBColor(31, 119, 180);
const WASTED: RGBColor = RGBColor(214, 39, 40);

/// The charts of one report (`by`), plus the memory-efficiency histogram of
/// `mem_effs` when there are any.
pub fn charts(by: &str, rows: &[Row], mem_effs: &[f64]) -> Vec<Bars> {
    let mut rows: Vec<&Row> = rows.iter().collect();
    rows.sort_by(|a, b| b.cpu_h.total_cmp(&a.cpu_h));
    let more = rows.len().saturating_sub(MAX_BARS);
    rows.truncate(MAX_BARS);
    let keys: Vec<String> = rows.iter().map(|r| r.key.clone()).collect();
    let col = |f: fn(&Row) -> f64| rows.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let suffix = if more > 0 {
        format!(" (top {MAX_BARS}, {more} more)")
    } else {
        String::new()
    };
    let bars = |title: &str, parts| Bars {
        title: format!("{title} by {by}{suffix}"),
        keys: keys.clone(),
        parts,
    };
    let mut out = vec![
        bars(
            "CPU hours",
            vec![
                ("used", USED, col(|r| (r.cpu_h - r.cpu_wasted_h).max(0.0))),
                ("wasted", WASTED, col(|r| r.cpu_wasted_h)),
            ],
        ),
        bars(
            "Memory GiB-hours",
            vec![
                (
                    "used",
                    USED,
                    col(|r| (r.mem_gbh - r.mem_wasted_gbh).max(0.0)),
                ),
                ("wasted", WASTED, col(|r| r.mem_wasted_gbh)),
            ],
        ),
        bars("GPU hours", vec![("reserved", USED, col(|r| r.gpu_h))]),
        bars(
            "CPU efficiency %",
            vec![("efficiency", USED, col(|r| r.cpu_eff.unwrap_or(0.0)))],
        ),
        bars(
            "Memory efficiency %",
            vec![("efficiency", USED, col(|r| r.mem_eff.unwrap_or(0.0)))],
        ),
    ];
    if !mem_effs.is_empty() {
        out.push(histogram(mem_effs));
    }
    out
}

/// Jobs by memory efficiency in steps of 10 % (100 % and more in the last).
pub fn histogram(mem_effs: &[f64]) -> Bars {
    let mut counts = vec![0.0; 10];
    for e in mem_effs {
        counts[((e / 10.0).max(0.0) as usize).min(9)] += 1.0;
    }
    Bars {
        title: format!("Jobs by memory efficiency ({} jobs)", mem_effs.len()),
        // The last bin holds 100 % and more (a job over its request):
        // labelled so, not "90-100%".
        keys: (0..10)
            .map(|i| match i {
                9 => "90%+".to_string(),
                _ => format!("{}-{}%", i * 10, i * 10 + 10),
            })
            .collect(),
        parts: vec![("jobs", USED, counts)],
    }
}

/// Pixels of one chart's height.
pub const CHART_HEIGHT: u32 = 260;

/// Draws the charts one under the other.
pub fn draw_charts<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    charts: &[Bars],
) -> Result<()> {
    register_font();
    root.fill(&WHITE).map_err(draw::drawing)?;
    for (bars, area) in charts
        .iter()
        .zip(root.split_evenly((charts.len().max(1), 1)))
    {
        draw_bars(&area, bars).map_err(draw::drawing)?;
    }
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    bars: &Bars,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let n = bars.keys.len().max(1);
    let totals: Vec<f64> = (0..n)
        .map(|i| {
            bars.parts
                .iter()
                .map(|p| p.2.get(i).copied().unwrap_or(0.0))
                .sum()
        })
        .collect();
    let top = totals.iter().copied().fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let font = draw::font;
    let mut chart = ChartBuilder::on(area)
        .caption(&bars.title, font(15.0))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n.max(2) - 1).into_segmented(), 0.0..top)?;
    let keys = &bars.keys;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            keys.get(*i).map(|k| short(k)).unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label)
        .label_style(font(10.0))
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let mut base = vec![0.0; n];
    for (name, color, values) in &bars.parts {
        let rects = values.iter().enumerate().map(|(i, v)| {
            let (y0, y1) = (base[i], base[i] + v);
            base[i] = y1;
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), y0),
                    (SegmentValue::Exact(i + 1), y1),
                ],
                color.filled(),
            );
            r.set_margin(0, 0, 3, 3);
            r
        });
        chart
            .draw_series(rects)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    if bars.parts.len() > 1 {
        chart
            .configure_series_labels()
            .label_font(font(11.0))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    Ok(())
}

/// A key shortened for an axis label.
fn short(k: &str) -> String {
    if k.chars().count() <= 12 {
        return k.to_string();
    }
    let mut s: String = k.chars().take(11).collect();
    s.push('…');
    s
}

/// The image size of `charts`.
pub fn size(charts: &[Bars]) -> (u32, u32) {
    (1000, CHART_HEIGHT * charts.len().max(1) as u32)
}

/// The `report` subcommand: the first report key's charts.
pub fn write_report(out: &mut dyn Write, stream: &Stream, format: Format) -> Result<()> {
    let groups = rows_by_key(stream);
    let Some((by, rows)) = groups.first() else {
        return Err(Error::Other("no report records in the input".into()));
    };
    if groups.len() > 1 {
        hpc_core::note!(
            "hpc-plot: the input has reports by {} keys; drawing the first ({})",
            groups.len(),
            hpc_core::paths::escaped(by)
        );
    }
    let effs: Vec<f64> = stream.jobs.iter().filter_map(|j| j.mem_eff).collect();
    let charts = charts(by, rows, &effs);
    let size = size(&charts);
    match format {
        Format::Png => {
            let (rgb, ()) = draw::bitmap(size, |root| draw_charts(root, &charts))?;
            draw::write_png(out, &rgb, size)
        }
        _ => {
            let (svg, ()) = draw::svg(size, |root| draw_charts(root, &charts))?;
            Ok(out.write_all(svg.as_bytes())?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_efficiency_bin_says_it_holds_more_than_100() {
        // A job at 250 % of its request was counted under "90-100%".
        let h = histogram(&[5.0, 95.0, 250.0]);
        assert_eq!(h.keys[0], "0-10%");
        assert_eq!(h.keys[9], "90%+");
        assert_eq!(h.parts[0].2[9], 2.0);
    }
}
