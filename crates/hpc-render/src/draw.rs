//! Drawing a [`JobPlot`] with plotters, on a bitmap (PNG) or as SVG, with
//! the font bundled in the binary.

use std::ops::Range;
use std::sync::Once;

use hpc_core::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, RGBColor};

use crate::panels::{JobPlot, Line, Panel};

/// DejaVu Sans (Bitstream Vera licence, see fonts/LICENSE-DejaVu).
static FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
/// The family name the bundled font is registered under.
pub const FAMILY: &str = "sans-serif";

/// The colours of a panel's traces (job-wide lines).
pub const TRACE_COLORS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(44, 160, 44)];
/// The colour of reference lines (requested memory, allocated CPUs, 0.20).
pub const REFERENCE: RGBColor = RGBColor(214, 39, 40);
/// The colour of flag marks.
pub const FLAG: RGBColor = RGBColor(255, 127, 14);
/// Pixels of a panel's height.
pub const PANEL_HEIGHT: u32 = 210;
/// Pixels above the panels, for the title.
pub const TITLE_HEIGHT: u32 = 36;
const Y_LABELS: u32 = 64;
const X_LABELS: u32 = 22;
const MARGIN: u32 = 10;

/// Registers the bundled font (once).
pub fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid font, checked by a test.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// The bundled font at `size`.
pub fn font(size: f64) -> FontDesc<'static> {
    FontDesc::new(FontFamily::Name(FAMILY), size, FontStyle::Normal)
}

/// A plotters drawing error as the tools' error.
pub fn drawing<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> Error {
    Error::Other(format!("drawing: {e}"))
}

/// Where a panel's plotting area lies, in pixels (for tests and callers).
#[derive(Debug, Clone, PartialEq)]
pub struct PanelGeom {
    /// Pixel columns of the plotting area.
    pub x: Range<i32>,
    /// Pixel rows of the plotting area (top to bottom).
    pub y: Range<i32>,
    /// The value at the top of the y axis.
    pub y_max: f64,
}

/// The image size of a job plot `width` pixels wide.
pub fn job_size(width: u32) -> (u32, u32) {
    (width, TITLE_HEIGHT + PANEL_HEIGHT * 6)
}

/// The data columns of a job plot `width` pixels wide (one per pixel of
/// the plotting area).
pub fn job_columns(width: u32) -> usize {
    width.saturating_sub(Y_LABELS + 2 * MARGIN).max(10) as usize
}

/// A duration in seconds, short: `42s`, `17m`, `3.5h`.
pub fn short_duration(s: f64) -> String {
    match s {
        s if s < 10.0 => format!("{s:.1}s"),
        s if s < 120.0 => format!("{s:.0}s"),
        s if s < 7200.0 => match (s.round() as u64) % 60 {
            0 => format!("{}m", s.round() as u64 / 60),
            r => format!("{}m{r:02}s", s.round() as u64 / 60),
        },
        s => format!("{:.1}h", s / 3600.0),
    }
}

/// A panel's x axis: pixel columns, with the ticks at round times (see
/// [`time_ticks`]) instead of plotters' round column numbers.
pub struct TimeAxis {
    cols: plotters::coord::types::RangedCoordf64,
    ticks: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for TimeAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.cols.map(value, limit)
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.cols.range()
    }
}

/// The time axis's step and ticks (seconds from the start) over `span`:
/// the smallest round step (1-2-5 seconds, then 15 and 30 s, 1-2-5-10-15-30
/// minutes, 1-2-3-6-12 hours, then days) that gives at most 8 steps (9
/// ticks with the one at 0). Ticks
/// at round pixel columns, labelled rounded, said "2m" at 144 s.
pub fn time_ticks(span: f64) -> (f64, Vec<f64>) {
    const STEPS: [f64; 22] = [
        0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
        3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0, 172800.0,
    ];
    let span = if span.is_finite() { span.max(0.0) } else { 0.0 };
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 8.0)
        .unwrap_or_else(|| (span / 8.0 / 86400.0).ceil() * 86400.0);
    let n = (span / step + 1e-9).floor() as usize;
    (step, (0..=n).map(|k| k as f64 * step).collect())
}

/// A tick's time `t` (seconds, a multiple of `step`), exact: `45s`, `12m`,
/// `1h30`, `2d`, `1d12h`.
pub fn tick_label(t: f64, step: f64) -> String {
    if step < 1.0 {
        return format!("{t:.1}s");
    }
    let t = t.round() as u64;
    match step as u64 {
        s if s < 60 => format!("{t}s"),
        s if s < 3600 => format!("{}m", t / 60),
        s if s < 86400 => match t % 3600 {
            0 => format!("{}h", t / 3600),
            r => format!("{}h{:02}", t / 3600, r / 60),
        },
        _ => match t % 86400 {
            0 => format!("{}d", t / 86400),
            r => format!("{}d{}h", t / 86400, r / 3600),
        },
    }
}

/// Draws a job plot on `root`; returns each panel's geometry.
pub fn draw_job<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &JobPlot,
    title: &str,
) -> Result<Vec<PanelGeom>> {
    register_font();
    root.fill(&WHITE).map_err(drawing)?;
    let (top, rest) = root.split_vertically(TITLE_HEIGHT);
    top.draw_text(title, &font(18.0).color(&BLACK), (MARGIN as i32, 8))
        .map_err(drawing)?;
    let areas = rest.split_evenly((plot.panels.len(), 1));
    plot.panels
        .iter()
        .zip(&areas)
        .map(|(p, area)| draw_panel(area, plot, p))
        .collect()
}

/// The envelope of a reduced line: per column a vertical stroke from its
/// minimum to its maximum (joined in the order that meets the previous
/// column), so a one-sample spike is drawn; drawn 1 pixel wide.
fn envelope(line: &Line) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(line.bins.len() * 2);
    let mut last: Option<f64> = None;
    for (i, b) in line.bins.iter().enumerate() {
        let Some(b) = b else { continue };
        let x = i as f64 + 0.5;
        let (lo, hi) = (f64::from(b.min), f64::from(b.max));
        let up = last.map_or(true, |l| (l - lo).abs() <= (l - hi).abs());
        let (a, z) = if up { (lo, hi) } else { (hi, lo) };
        out.push((x, a));
        if z != a {
            out.push((x, z));
        }
        last = Some(z);
    }
    out
}

/// The line through the columns' means.
fn means(line: &Line) -> Vec<(f64, f64)> {
    let bins = line.bins.iter().enumerate();
    bins.filter_map(|(i, b)| Some((i as f64 + 0.5, (*b)?.mean())))
        .collect()
}

/// The envelope's and the mean line's styles: the job-wide mean line bold
/// in the trace's colour over a pale envelope, a node's thin and paler.
fn line_styles(line: &Line) -> (ShapeStyle, ShapeStyle) {
    let c = TRACE_COLORS[line.trace % TRACE_COLORS.len()];
    match line.host {
        None => (c.mix(0.4).stroke_width(1), c.stroke_width(2)),
        Some(_) => (c.mix(0.2).stroke_width(1), c.mix(0.5).stroke_width(1)),
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    plot: &JobPlot,
    p: &Panel,
) -> Result<PanelGeom> {
    let n = plot.ncols as f64;
    let y_max = if p.measured { p.y_max } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .margin_top(4)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(
            TimeAxis {
                cols: (0.0..n).into(),
                ticks: time_ticks(plot.t1 - plot.t0)
                    .1
                    .iter()
                    .map(|t| t / (plot.t1 - plot.t0).max(1e-9) * n)
                    .collect(),
            },
            0.0..y_max,
        )
        .map_err(drawing)?;
    let span = plot.t1 - plot.t0;
    let step = time_ticks(span).0;
    // The key points are round times: each label is its tick's time.
    let xfmt = |x: &f64| tick_label((x / n * span / step).round() * step, step);
    chart
        .configure_mesh()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .y_labels(5)
        .x_label_formatter(&xfmt)
        .label_style(font(11.0))
        .draw()
        .map_err(drawing)?;
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let geom = PanelGeom {
        x: xr,
        y: yr,
        y_max,
    };
    let plotting = chart.plotting_area().strip_coord_spec();
    plotting
        .draw_text(p.def.title, &font(13.0).color(&BLACK), (6, 4))
        .map_err(drawing)?;
    if !p.measured {
        let (w, h) = plotting.dim_in_pixel();
        let style = font(16.0)
            .color(&BLACK.mix(0.6))
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Center,
            ));
        plotting
            .draw_text("not measured", &style, (w as i32 / 2, h as i32 / 2))
            .map_err(drawing)?;
        return Ok(geom);
    }
    draw_legend(&plotting, p)?;
    for line in &p.lines {
        let (thin, bold) = line_styles(line);
        let mean = means(line);
        // A lone reading is a path of one point, which draws nothing: a
        // dot shows it.
        if let [one] = mean[..] {
            chart
                .draw_series(std::iter::once(Circle::new(one, 3, bold.filled())))
                .map_err(drawing)?;
        }
        let paths = [
            PathElement::new(envelope(line), thin),
            PathElement::new(mean, bold),
        ];
        chart.draw_series(paths).map_err(drawing)?;
    }
    draw_reference(&mut chart, p, y_max)?;
    draw_marks(&mut chart, p, y_max)?;
    Ok(geom)
}

fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<()> {
    let mut x = 6 + 9 * p.def.title.len() as i32;
    for (i, t) in p.def.traces.iter().enumerate() {
        let c = TRACE_COLORS[i % TRACE_COLORS.len()];
        area.draw_text(t.label, &font(12.0).color(&c), (x, 5))
            .map_err(drawing)?;
        x += 10 + 8 * t.label.len() as i32;
    }
    if p.lines.iter().any(|l| l.host.is_some()) {
        area.draw_text(
            "(thin: nodes, bold: job)",
            &font(11.0).color(&BLACK.mix(0.6)),
            (x, 5),
        )
        .map_err(drawing)?;
    }
    Ok(())
}

type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<TimeAxis, plotters::coord::types::RangedCoordf64>>;

/// The panel's reference line (red) with its label above it.
fn draw_reference<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    p: &Panel,
    y_max: f64,
) -> Result<()> {
    let n = chart.x_range().end;
    if let Some(r) = p.reference {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, r), (n, r)],
                REFERENCE.stroke_width(2),
            )))
            .map_err(drawing)?;
        let label = format!("{} {}", p.def.reference_label, short_value(r));
        chart
            .draw_series(std::iter::once(Text::new(
                label,
                (n * 0.86, r + y_max * 0.06),
                font(11.0).color(&REFERENCE),
            )))
            .map_err(drawing)?;
    }
    Ok(())
}

fn draw_marks<DB: DrawingBackend>(chart: &mut Chart<'_, DB>, p: &Panel, y_max: f64) -> Result<()> {
    let n = chart.x_range().end;
    let mut whole_run = 0;
    for m in &p.marks {
        let style = font(12.0).color(&FLAG);
        match m.col {
            Some(c) => {
                let x = c as f64 + 0.5;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, 0.0), (x, y_max)],
                        FLAG.stroke_width(2),
                    )))
                    .map_err(drawing)?;
                let lx = if x > n * 0.8 {
                    x - n * 0.12
                } else {
                    x + n * 0.005
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        m.flag.clone(),
                        (lx, y_max * 0.93),
                        style,
                    )))
                    .map_err(drawing)?;
            }
            None => {
                whole_run += 1;
                let y = y_max * (0.97 - 0.1 * f64::from(whole_run));
                let label = format!("flag: {}", m.flag);
                chart
                    .draw_series(std::iter::once(Text::new(label, (n * 0.62, y), style)))
                    .map_err(drawing)?;
            }
        }
    }
    Ok(())
}

/// A value for a label: `4`, `3.5`, `0.20`, `120`; never `-0` (an empty
/// sum of floats is -0.0).
pub fn short_value(v: f64) -> String {
    let v = v + 0.0;
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// Renders `draw` on an RGB bitmap of `size`; returns the pixels.
pub fn bitmap<T>(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<T>,
) -> Result<(Vec<u8>, T)> {
    let mut buf = vec![255u8; size.0 as usize * size.1 as usize * 3];
    let t = {
        let root = BitMapBackend::with_buffer(&mut buf, size).into_drawing_area();
        let t = draw(&root)?;
        root.present().map_err(drawing)?;
        t
    };
    Ok((buf, t))
}

/// Renders `draw` as an SVG document of `size`.
pub fn svg<T>(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<T>,
) -> Result<(String, T)> {
    let mut out = String::new();
    let t = {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let t = draw(&root)?;
        root.present().map_err(drawing)?;
        t
    };
    Ok((out, t))
}

/// Encodes RGB pixels as PNG.
pub fn write_png(out: &mut dyn std::io::Write, rgb: &[u8], size: (u32, u32)) -> Result<()> {
    let mut enc = png::Encoder::new(out, size.0, size.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    let png_err = |e: png::EncodingError| match e {
        png::EncodingError::IoError(io) => Error::from(io),
        e => Error::Other(format!("png: {e}")),
    };
    enc.write_header()
        .map_err(png_err)?
        .write_image_data(rgb)
        .map_err(png_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_sum_is_shown_as_0_not_minus_0() {
        // The HTML report said "GPU hours reserved: -0" and the mail
        // "CPU hours: -0 reserved" when no job had any.
        let empty: f64 = std::iter::empty::<f64>().sum();
        assert_eq!(short_value(empty), "0");
        assert_eq!(short_value(-2.0), "-2");
        assert_eq!(short_value(3.5), "3.5");
    }

    #[test]
    fn time_ticks_are_round_times_labelled_exactly() {
        // A 200 s job was ticked at 36s, 72s, 108s, "2m" (144 s), "3m" and
        // titled "3m".
        let (step, ticks) = time_ticks(200.0);
        assert_eq!(step, 30.0);
        assert_eq!(ticks, [0.0, 30.0, 60.0, 90.0, 120.0, 150.0, 180.0]);
        assert_eq!(tick_label(150.0, step), "150s");
        assert_eq!(short_duration(200.0), "3m20s");
        // 100 minutes: every 15 minutes, 90m the last.
        let (step, ticks) = time_ticks(6000.0);
        assert_eq!((step, ticks.len()), (900.0, 7));
        assert_eq!(tick_label(5400.0, step), "90m");
        assert_eq!(tick_label(5400.0, 1800.0 * 2.0), "1h30");
        assert_eq!(tick_label(129_600.0, 86_400.0), "1d12h");
        assert!(time_ticks(40.0 * 86400.0).1.len() <= 9);
        assert_eq!(time_ticks(0.0).1, [0.0]);
    }
}
