//! The `backtest` picture: the records of `hpc-model backtest --format
//! ndjson` (one replay) in two panels side by side.
//!
//! - Left, each policy's MAQ against its warm under-share: the policies
//!   with a stated risk (`ours`) as points joined in risk order, each
//!   labelled with its risk, and the baselines (`request`, `median`,
//!   `p95x1.2`, `max`) as labelled squares. Up and to the left wins; a
//!   rule beaten by another (as much MAQ or more at no more under-share)
//!   is drawn hollow.
//! - Right, the calibration: stated risk against the observed warm
//!   under-share, with the diagonal, the band 0.5x..1.5x and, at a stated
//!   risk of 1 % or less, the bound 2x; a point outside is red.

use std::io::Write;

use hpc_core::advice::Backtest;
use hpc_core::paths::escaped;
use hpc_core::{Error, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::{self, font, register_font, FLAG, REFERENCE, TITLE_HEIGHT, TRACE_COLORS};
use crate::stream::Stream;
use crate::Format;

/// The image size, in pixels.
pub const SIZE: (u32, u32) = (1200, 560);

/// The colours of the policies with a risk, in order of appearance.
const CURVE_COLORS: [RGBColor; 4] = [
    TRACE_COLORS[0],
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];
/// The band's and the bound's colour.
const BAND: RGBColor = TRACE_COLORS[1];
/// Text about the band, darker.
const BAND_TEXT: RGBColor = RGBColor(30, 120, 30);
const GREY: RGBColor = RGBColor(110, 110, 110);

/// One replay: the records of one resource, each policy at each risk once.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// What was sized, as the records say (`mem` or `time`).
    pub resource: String,
    /// Jobs replayed (the first record's count).
    pub jobs: u64,
    /// The policies with a stated risk, in order of first appearance, each
    /// with its records sorted by risk.
    pub curves: Vec<(String, Vec<Backtest>)>,
    /// The policies without a risk, in input order.
    pub baselines: Vec<Backtest>,
}

impl Replay {
    /// The replay drawn from `records`: those of the first record's
    /// resource, and of a policy at a risk given twice (a later replay of
    /// the same resource) the first. A note on stderr tells what is left
    /// out.
    pub fn of(records: &[Backtest]) -> Result<Replay> {
        let Some(first) = records.first() else {
            return Err(Error::Other("no backtest records in the input".into()));
        };
        let resource = first.resource.clone();
        let mut others: Vec<&str> = Vec::new();
        let mut repeated = 0;
        let mut replay = Replay {
            resource: resource.clone(),
            jobs: first.jobs,
            curves: Vec::new(),
            baselines: Vec::new(),
        };
        for b in records {
            if b.resource != resource {
                if !others.contains(&b.resource.as_str()) {
                    others.push(&b.resource);
                }
                continue;
            }
            if replay.has(b) {
                repeated += 1;
                continue;
            }
            if b.risk.is_none() {
                replay.baselines.push(b.clone());
            } else if let Some((_, recs)) = replay.curves.iter_mut().find(|(p, _)| *p == b.policy) {
                recs.push(b.clone());
            } else {
                replay.curves.push((b.policy.clone(), vec![b.clone()]));
            }
        }
        for (_, recs) in &mut replay.curves {
            recs.sort_by(|a, b| risk_of(a).total_cmp(&risk_of(b)));
        }
        if !others.is_empty() {
            let others: Vec<String> = others.iter().map(|r| escaped(r)).collect();
            hpc_core::note!(
                "hpc-plot: the input has backtests of {} resources; drawing the first ({}), not {}",
                others.len() + 1,
                escaped(&resource),
                others.join(", ")
            );
        }
        if repeated > 0 {
            hpc_core::note!(
                "hpc-plot: {repeated} backtest records repeat a policy at a risk already read (a later replay): drawing the first"
            );
        }
        Ok(replay)
    }

    /// Whether a record of `b`'s policy at `b`'s risk is already in.
    fn has(&self, b: &Backtest) -> bool {
        let same = |a: &Backtest| a.policy == b.policy && risk_key(a) == risk_key(b);
        self.baselines.iter().any(same) || self.curves.iter().flat_map(|(_, recs)| recs).any(same)
    }

    /// Every record drawn, curves first.
    fn all(&self) -> impl Iterator<Item = &Backtest> {
        let curves = self.curves.iter().flat_map(|(_, recs)| recs);
        curves.chain(&self.baselines)
    }

    /// The title: what was sized, and over how many jobs.
    pub fn title(&self) -> String {
        format!(
            "Backtest of {} sizing: {} jobs replayed",
            resource_name(&self.resource),
            self.jobs
        )
    }
}

fn risk_of(b: &Backtest) -> f64 {
    b.risk.unwrap_or(0.0)
}

/// A risk compared to another's in hundredths of a percent.
fn risk_key(b: &Backtest) -> Option<i64> {
    b.risk.map(|r| (r * 1e4).round() as i64)
}

/// `mem` and `time` as words; another resource shown as given.
fn resource_name(r: &str) -> String {
    match r {
        "mem" => "memory".into(),
        "time" => "time".into(),
        other => label(other),
    }
}

/// A name from the file as a label: control characters escaped, at most
/// 24 characters (SVG text is escaped by the backend).
pub fn label(name: &str) -> String {
    let name = escaped(name);
    if name.chars().count() <= 24 {
        return name;
    }
    let mut s: String = name.chars().take(23).collect();
    s.push('…');
    s
}

/// A fraction as a percentage label: `1 %`, `2.5 %`, `0.25 %`.
pub fn percent(f: f64) -> String {
    let p = f * 100.0;
    if (p - p.round()).abs() < 1e-6 {
        return format!("{p:.0} %");
    }
    let s = format!("{p:.2}");
    format!("{} %", s.trim_end_matches('0').trim_end_matches('.'))
}

/// Whether an observed warm under-share keeps a stated risk: within
/// 0.5x..1.5x of it, or at most 2x at a risk of 1 % or less.
pub fn calibrated(risk: f64, seen: f64) -> bool {
    if risk <= 0.01 + 1e-9 {
        seen <= 2.0 * risk
    } else {
        seen >= 0.5 * risk && seen <= 1.5 * risk
    }
}

/// Whether another record has as much MAQ or more at no more warm
/// under-share, and is better in one of them.
fn beaten(b: &Backtest, all: &[&Backtest]) -> bool {
    all.iter().any(|o| {
        o.maq >= b.maq
            && o.warm_under_share <= b.warm_under_share
            && (o.maq > b.maq || o.warm_under_share < b.warm_under_share)
    })
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Draws the picture of `replay` on `root`.
pub fn draw_backtest<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    replay: &Replay,
) -> Result<()> {
    register_font();
    root.fill(&WHITE).map_err(draw::drawing)?;
    let (top, rest) = root.split_vertically(TITLE_HEIGHT);
    top.draw_text(&replay.title(), &font(18.0).color(&BLACK), (10, 8))
        .map_err(draw::drawing)?;
    let (left, right) = rest.split_horizontally(rest.dim_in_pixel().0 / 2);
    draw_policies(&left, replay).map_err(draw::drawing)?;
    draw_calibration(&right, replay).map_err(draw::drawing)?;
    Ok(())
}

/// The upper end of an axis over values up to `max`, with room for labels.
fn axis_top(max: f64, least: f64) -> f64 {
    (max * 1.15).max(least)
}

/// A marker at `at` (a filled or hollow circle or square) with a label
/// beside it: a square's above and to the right, a circle's on a rising
/// curve below and to the right (both above and to the left when the point
/// lies in the right part).
fn marker<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    at: (f64, f64),
    square: bool,
    filled: bool,
    color: RGBColor,
    text: String,
) -> DrawResult<DB> {
    let x_max = chart.x_range().end;
    let style = if filled {
        color.filled()
    } else {
        color.stroke_width(2)
    };
    let (pos, offset) = if at.0 > x_max * 0.8 {
        (Pos::new(HPos::Right, VPos::Bottom), (-7, -4))
    } else if square {
        (Pos::new(HPos::Left, VPos::Bottom), (7, -4))
    } else {
        (Pos::new(HPos::Left, VPos::Top), (7, 3))
    };
    let label = Text::new(text, offset, font(12.0).color(&color).pos(pos));
    if square {
        let mark = Rectangle::new([(-5, -5), (5, 5)], style);
        chart.draw_series(std::iter::once(EmptyElement::at(at) + mark + label))?;
    } else {
        let mark = Circle::new((0, 0), 4, style);
        chart.draw_series(std::iter::once(EmptyElement::at(at) + mark + label))?;
    }
    Ok(())
}

/// Text in the plotting area's top-left corner, one line a string.
fn notes<DB: DrawingBackend>(
    chart: &Chart<'_, DB>,
    lines: &[(String, RGBColor)],
) -> DrawResult<DB> {
    let area = chart.plotting_area().strip_coord_spec();
    for (i, (text, color)) in lines.iter().enumerate() {
        area.draw_text(text, &font(11.0).color(color), (8, 6 + 15 * i as i32))?;
    }
    Ok(())
}

fn draw_policies<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    replay: &Replay,
) -> DrawResult<DB> {
    let all: Vec<&Backtest> = replay.all().collect();
    let pct = |b: &Backtest| b.warm_under_share * 100.0;
    let x_max = axis_top(all.iter().map(|b| pct(b)).fold(0.0, f64::max), 1.0);
    let lo = all.iter().map(|b| b.maq).fold(f64::INFINITY, f64::min);
    let hi = all.iter().map(|b| b.maq).fold(f64::NEG_INFINITY, f64::max);
    let span = (hi - lo).max(0.05);
    let (y_min, y_max) = ((lo - 0.15 * span).max(0.0), hi + 0.3 * span);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "MAQ against under-share: higher and further left is better",
            font(14.0),
        )
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, y_min..y_max)?;
    let ran_out = match replay.resource.as_str() {
        "time" => "ran out of time",
        "mem" => "ran out of memory",
        _ => "ran out",
    };
    chart
        .configure_mesh()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .x_labels(8)
        .y_labels(6)
        .x_label_formatter(&|x| draw::short_value(*x))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .x_desc(format!("warm jobs that {ran_out} at the first try (%)"))
        .y_desc("MAQ: used / (used + over + under)")
        .label_style(font(11.0))
        .axis_desc_style(font(12.0))
        .draw()?;
    for (i, (policy, recs)) in replay.curves.iter().enumerate() {
        let color = CURVE_COLORS[i % CURVE_COLORS.len()];
        let points: Vec<(f64, f64)> = recs.iter().map(|b| (pct(b), b.maq)).collect();
        chart.draw_series(std::iter::once(PathElement::new(
            points,
            color.stroke_width(2),
        )))?;
        for (j, b) in recs.iter().enumerate() {
            let risk = percent(risk_of(b));
            let text = if j == 0 {
                format!("{} {risk}", label(policy))
            } else {
                risk
            };
            let filled = !beaten(b, &all);
            marker(&mut chart, (pct(b), b.maq), false, filled, color, text)?;
        }
    }
    for b in &replay.baselines {
        let filled = !beaten(b, &all);
        marker(
            &mut chart,
            (pct(b), b.maq),
            true,
            filled,
            FLAG,
            label(&b.policy),
        )?;
    }
    let mut lines = vec![("↖ better: more MAQ, fewer jobs run out".to_string(), GREY)];
    if !replay.curves.is_empty() {
        lines.push(("● by stated risk, ■ baselines".into(), GREY));
    }
    if all.iter().any(|b| beaten(b, &all)) {
        lines.push(("hollow: beaten by another rule".into(), GREY));
    }
    notes(&chart, &lines)
}

fn draw_calibration<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    replay: &Replay,
) -> DrawResult<DB> {
    let points = replay.curves.iter().flat_map(|(_, recs)| recs);
    let max_risk = points
        .clone()
        .map(|b| risk_of(b) * 100.0)
        .fold(0.0, f64::max);
    let max_seen = points
        .clone()
        .map(|b| b.warm_under_share * 100.0)
        .fold(0.0, f64::max);
    let low = points.clone().filter(|b| risk_of(b) <= 0.01 + 1e-9);
    let max_bound = low.clone().map(|b| risk_of(b) * 200.0).fold(0.0, f64::max);
    let x_max = (max_risk * 1.2).max(1.2);
    let y_max = (1.5 * x_max)
        .max(axis_top(max_seen, 0.0))
        .max(max_bound * 1.15);
    let mut chart = ChartBuilder::on(area)
        .caption("Calibration: observed against stated risk", font(14.0))
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|x| draw::short_value(*x))
        .y_label_formatter(&|y| draw::short_value(*y))
        .x_desc("stated risk (%)")
        .y_desc("warm jobs that ran out (%)")
        .label_style(font(11.0))
        .axis_desc_style(font(12.0))
        .draw()?;
    if replay.curves.is_empty() {
        let (w, h) = chart.plotting_area().dim_in_pixel();
        let style = font(16.0)
            .color(&BLACK.mix(0.6))
            .pos(Pos::new(HPos::Center, VPos::Center));
        chart.plotting_area().strip_coord_spec().draw_text(
            "no policy with a stated risk",
            &style,
            (w as i32 / 2, h as i32 / 2),
        )?;
        return Ok(());
    }
    // The band 0.5x..1.5x (y_max >= 1.5 x_max: it lies inside the area).
    chart.draw_series(std::iter::once(Polygon::new(
        vec![(0.0, 0.0), (x_max, 0.5 * x_max), (x_max, 1.5 * x_max)],
        BAND.mix(0.15).filled(),
    )))?;
    chart.draw_series(std::iter::once(DashedPathElement::new(
        vec![(0.0, 0.0), (x_max, x_max)],
        6,
        4,
        GREY.stroke_width(1),
    )))?;
    // At 1 % or less: at most 2x, a bar from 0 with a tick at the bound.
    for b in low {
        let (r, bound) = (risk_of(b) * 100.0, risk_of(b) * 200.0);
        let bar = BAND.mix(0.6).stroke_width(3);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(r, 0.0), (r, bound)],
            bar,
        )))?;
        chart.draw_series(std::iter::once(
            EmptyElement::at((r, bound))
                + PathElement::new(vec![(-6, 0), (6, 0)], bar)
                + Text::new(
                    format!("≤ {}", percent(risk_of(b) * 2.0)),
                    (-8, 0),
                    font(11.0)
                        .color(&BAND_TEXT)
                        .pos(Pos::new(HPos::Right, VPos::Center)),
                ),
        ))?;
    }
    for (i, (_, recs)) in replay.curves.iter().enumerate() {
        let color = CURVE_COLORS[i % CURVE_COLORS.len()];
        let points: Vec<(f64, f64)> = recs
            .iter()
            .map(|b| (risk_of(b) * 100.0, b.warm_under_share * 100.0))
            .collect();
        chart.draw_series(std::iter::once(PathElement::new(
            points,
            color.stroke_width(2),
        )))?;
        for b in recs {
            let at = (risk_of(b) * 100.0, b.warm_under_share * 100.0);
            let ok = calibrated(risk_of(b), b.warm_under_share);
            let c = if ok { color } else { REFERENCE };
            marker(&mut chart, at, false, true, c, percent(risk_of(b)))?;
        }
    }
    let mut lines = vec![
        ("dashed: observed = stated".to_string(), GREY),
        ("shaded: 0.5x to 1.5x the stated risk".into(), BAND_TEXT),
    ];
    if max_bound > 0.0 {
        lines.push(("bar: at 1 % or less, at most 2x".into(), GREY));
    }
    if points
        .clone()
        .any(|b| !calibrated(risk_of(b), b.warm_under_share))
    {
        lines.push(("red: outside".into(), REFERENCE));
    }
    notes(&chart, &lines)
}

/// The `backtest` subcommand: the first replay's picture.
pub fn write_backtest(out: &mut dyn Write, stream: &Stream, format: Format) -> Result<()> {
    let replay = Replay::of(&stream.backtests)?;
    match format {
        Format::Png => {
            let (rgb, ()) = draw::bitmap(SIZE, |root| draw_backtest(root, &replay))?;
            draw::write_png(out, &rgb, SIZE)
        }
        _ => {
            let (svg, ()) = draw::svg(SIZE, |root| draw_backtest(root, &replay))?;
            Ok(out.write_all(svg.as_bytes())?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(policy: &str, risk: Option<f64>, resource: &str, seen: f64, maq: f64) -> Backtest {
        Backtest {
            policy: policy.into(),
            risk,
            resource: resource.into(),
            jobs: 100,
            cold: 4,
            under_share: seen,
            warm_under_share: seen,
            level: None,
            memtime_ratio: None,
            over_gbh: 1.0,
            under_gbh: 1.0,
            wastage_gbh: 2.0,
            maq,
            retries_per_job: seen,
        }
    }

    #[test]
    fn the_first_resource_is_drawn_once_in_risk_order() {
        let recs = [
            rec("ours", Some(0.05), "mem", 0.05, 0.5),
            rec("ours", Some(0.01), "mem", 0.01, 0.4),
            rec("max", None, "mem", 0.02, 0.39),
            rec("ours", Some(0.01), "time", 0.01, 0.4),
            rec("ours", Some(0.01), "mem", 0.3, 0.1),
            rec("max", None, "mem", 0.3, 0.1),
        ];
        let r = Replay::of(&recs).unwrap();
        assert_eq!(r.resource, "mem");
        assert_eq!(r.curves.len(), 1);
        let risks: Vec<f64> = r.curves[0].1.iter().map(risk_of).collect();
        assert_eq!(risks, vec![0.01, 0.05]);
        assert_eq!(r.curves[0].1[0].warm_under_share, 0.01, "the first kept");
        assert_eq!(r.baselines.len(), 1);
        assert_eq!(r.title(), "Backtest of memory sizing: 100 jobs replayed");
        assert!(Replay::of(&[]).is_err());
    }

    #[test]
    fn labels_percentages_and_the_band() {
        assert_eq!(percent(0.01), "1 %");
        assert_eq!(percent(0.05), "5 %");
        assert_eq!(percent(0.025), "2.5 %");
        assert_eq!(percent(0.0025), "0.25 %");
        assert_eq!(label("a\u{1}b"), "a\\u{1}b");
        assert_eq!(label(&"x".repeat(30)).chars().count(), 24);
        assert!(calibrated(0.01, 0.019) && !calibrated(0.01, 0.021));
        assert!(calibrated(0.05, 0.06) && !calibrated(0.05, 0.08) && !calibrated(0.05, 0.02));
    }

    #[test]
    fn a_rule_with_less_maq_at_more_under_share_is_beaten() {
        let a = rec("ours", Some(0.05), "mem", 0.05, 0.5);
        let b = rec("max", None, "mem", 0.15, 0.49);
        let c = rec("request", None, "mem", 0.0, 0.38);
        let all = [&a, &b, &c];
        assert!(beaten(&b, &all));
        assert!(!beaten(&a, &all) && !beaten(&c, &all));
    }
}
