//! Unicode sparklines of a job's panels, for a terminal (`job --format
//! txt`).

use std::fmt::Write as _;

use crate::draw::{short_duration, short_value};
use crate::panels::{JobPlot, Panel};

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
