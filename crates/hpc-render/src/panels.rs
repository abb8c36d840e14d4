//! The six panels of a job plot, as data, and what each panel draws once
//! the series are reduced to a given number of columns.

use crate::reduce::{combine, reduce, Bin};
use crate::stream::{Col, JobSeries, Stream};

/// How per-node values make a job-wide one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Summed over nodes (memory, cores, rates, threads).
    Sum,
    /// Averaged over nodes (a rate per access).
    Mean,
}

/// One drawn quantity of a panel.
#[derive(Debug)]
pub struct Trace {
    /// Its legend label.
    pub label: &'static str,
    /// Its column.
    pub col: Col,
    /// How nodes combine.
    pub combine: Combine,
}

/// The horizontal line a panel compares with.
#[derive(Debug, Clone, Copy)]
pub enum Reference {
    /// None.
    None,
    /// The requested memory in GiB.
    ReqMem,
    /// The allocated CPUs.
    AllocCpus,
    /// A fixed threshold.
    Fixed(f64),
}

/// One panel.
#[derive(Debug)]
pub struct PanelDef {
    /// Its title, with the unit.
    pub title: &'static str,
    /// What it draws.
    pub traces: &'static [Trace],
    /// Its reference line.
    pub reference: Reference,
    /// What its reference line is called.
    pub reference_label: &'static str,
}

const fn sum(label: &'static str, col: Col) -> Trace {
    Trace {
        label,
        col,
        combine: Combine::Sum,
    }
}

/// The panels, top to bottom.
pub const PANELS: [PanelDef; 6] = [
    PanelDef {
        title: "Memory RSS (GiB)",
        traces: &[sum("RSS", Col::RssGb)],
        reference: Reference::ReqMem,
        reference_label: "requested",
    },
    PanelDef {
        title: "CPU (busy cores)",
        traces: &[sum("cores", Col::Cores)],
        reference: Reference::AllocCpus,
        reference_label: "allocated",
    },
    PanelDef {
        title: "Disk (MiB/s)",
        traces: &[sum("read", Col::ReadMbps), sum("write", Col::WriteMbps)],
        reference: Reference::None,
        reference_label: "",
    },
    PanelDef {
        title: "Threads",
        traces: &[sum("threads", Col::Threads)],
        reference: Reference::None,
        reference_label: "",
    },
    PanelDef {
        title: "Lustre read + write (MiB/s)",
        traces: &[sum("Lustre", Col::Lustre)],
        reference: Reference::None,
        reference_label: "",
    },
    PanelDef {
        title: "NUMA miss rate",
        traces: &[Trace {
            label: "miss rate",
            col: Col::Numa,
            combine: Combine::Mean,
        }],
        reference: Reference::Fixed(0.20),
        reference_label: "threshold",
    },
];

/// Where a flag is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// The whole run (a label on the panel).
    Run,
    /// The last sample (the OOM kill, the time limit).
    End,
    /// The panel's highest point (a spike).
    Peak,
    /// The step down of a two-segment fit (the catastrophe).
    ChangePoint,
}

/// The flags, the panel each is marked on and where; a flag not listed is
/// marked on the CPU panel for the whole run.
pub const MARKS: &[(&str, usize, At)] = &[
    ("oom_killed", 0, At::End),
    ("timed_out", 1, At::End),
    ("mem_overrequest", 0, At::Run),
    ("mem_spike_plateau", 0, At::Peak),
    ("idle_cpu", 1, At::Run),
    ("single_threaded", 1, At::Run),
    ("catastrophe", 1, At::ChangePoint),
    ("high_cpi", 1, At::Run),
    ("cache_thrashing", 1, At::Run),
    ("node_imbalance", 1, At::Run),
    ("idle_nodes", 1, At::Run),
    ("io_dominant", 2, At::Run),
    ("lustre_metadata_heavy", 4, At::Run),
    ("lustre_io_dominant", 4, At::Run),
    ("numa_misplaced", 5, At::Run),
];

/// One reduced line of a panel.
#[derive(Debug, Clone)]
pub struct Line {
    /// Which trace of the panel.
    pub trace: usize,
    /// The host, or `None` for the job-wide line (drawn bold).
    pub host: Option<String>,
    /// One bin per column.
    pub bins: Vec<Option<Bin>>,
}

/// A flag marked on a panel.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The flag name.
    pub flag: String,
    /// The column, or `None` for the whole run.
    pub col: Option<usize>,
}

/// What one panel draws.
#[derive(Debug)]
pub struct Panel {
    /// Its definition.
    pub def: &'static PanelDef,
    /// False when no series has any value for it: "not measured".
    pub measured: bool,
    /// The top of its y axis.
    pub y_max: f64,
    /// The reference line's value, when known.
    pub reference: Option<f64>,
    /// Its lines, per-node ones first, the job-wide ones last.
    pub lines: Vec<Line>,
    /// Its flags.
    pub marks: Vec<Mark>,
}

/// A job's plot, reduced to `ncols` columns over `t0..t1`.
#[derive(Debug)]
pub struct JobPlot {
    /// The job id.
    pub job_id: String,
    /// First sample time.
    pub t0: f64,
    /// Last sample time.
    pub t1: f64,
    /// Columns.
    pub ncols: usize,
    /// The six panels.
    pub panels: Vec<Panel>,
}

/// A meta's requested memory (MiB) and CPUs.
type MetaReq = (Option<f64>, Option<u32>);

/// Requested memory (MiB) and allocated CPUs: the job record's, else the
/// job-wide summary's, else the sum over the metas.
fn requests(stream: &Stream, id: &str, series: &JobSeries) -> (Option<f64>, Option<f64>) {
    let job = stream.job(id);
    let extra = |k: &str| stream.summary(id).and_then(|s| s.extra.get(k)?.as_f64());
    let metas = |f: &dyn Fn(&MetaReq) -> Option<f64>| {
        if series.meta_req.is_empty() {
            return None;
        }
        series.meta_req.values().map(f).sum::<Option<f64>>()
    };
    let mem = job
        .and_then(|j| j.req_mem_mb)
        .or_else(|| extra("req_mem_mb"))
        .or_else(|| metas(&|m| m.0));
    let cpus = job
        .and_then(|j| j.alloc_cpus.map(f64::from))
        .or_else(|| extra("req_cpus"))
        .or_else(|| metas(&|m| m.1.map(f64::from)));
    (mem, cpus)
}

/// Reduces one trace: a line per host and the job-wide line (the merged
/// series, else the only host's, else the nodes combined per column).
fn trace_lines(
    series: &JobSeries,
    trace: usize,
    def: &Trace,
    span: (f64, f64),
    n: usize,
) -> Vec<Line> {
    let line = |host: Option<String>, bins| Line { trace, host, bins };
    let per_host: Vec<Line> = series
        .hosts
        .iter()
        .map(|(h, s)| line(Some(h.clone()), reduce(&s.t, s.col(def.col), span, n)))
        .collect();
    let whole = match (&series.aggregate, per_host.len()) {
        (Some(s), _) => reduce(&s.t, s.col(def.col), span, n),
        (None, 1) => per_host[0].bins.clone(),
        (None, _) => combine(per_host.iter().map(|l| &l.bins[..]), def.combine, n),
    };
    let mut lines = if per_host.len() > 1 {
        per_host
    } else {
        Vec::new()
    };
    lines.push(line(None, whole));
    lines
}

/// Builds the plot of job `id` of `stream` with `ncols` columns.
pub fn plan(stream: &Stream, id: &str, ncols: usize) -> Option<JobPlot> {
    let series = stream.series.get(id)?;
    let span = series.span()?;
    let (mem, cpus) = requests(stream, id, series);
    let mut panels: Vec<Panel> = PANELS
        .iter()
        .map(|def| {
            let lines: Vec<Line> = def
                .traces
                .iter()
                .enumerate()
                .flat_map(|(i, tr)| trace_lines(series, i, tr, span, ncols))
                .collect();
            let top = lines
                .iter()
                .flat_map(|l| l.bins.iter().flatten())
                .map(|b| f64::from(b.max))
                .fold(f64::NAN, f64::max);
            let reference = match def.reference {
                Reference::None => None,
                Reference::ReqMem => mem.map(|m| m / 1024.0),
                Reference::AllocCpus => cpus,
                Reference::Fixed(v) => Some(v),
            };
            let y_max = top.max(reference.unwrap_or(f64::NAN));
            Panel {
                def,
                measured: !top.is_nan(),
                y_max: if y_max.is_finite() && y_max > 0.0 {
                    y_max * 1.1
                } else {
                    1.0
                },
                reference,
                lines,
                marks: Vec::new(),
            }
        })
        .collect();
    let job = stream.job(id);
    let raw = job.map_or(id, |j| j.job_id_raw.as_str());
    for f in stream.flags_of(id, raw) {
        let (panel, at) = MARKS
            .iter()
            .find(|m| m.0 == f.flag)
            .map_or((1, At::Run), |m| (m.1, m.2));
        let col = place(&panels[panel], at, ncols);
        panels[panel].marks.push(Mark {
            flag: f.flag.clone(),
            col,
        });
    }
    Some(JobPlot {
        job_id: id.to_string(),
        t0: span.0,
        t1: span.1,
        ncols,
        panels,
    })
}

/// The column where a flag applies on `panel`.
fn place(panel: &Panel, at: At, ncols: usize) -> Option<usize> {
    let whole = panel.lines.iter().rfind(|l| l.host.is_none())?;
    let present = || {
        whole
            .bins
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((i, (*b)?)))
    };
    match at {
        At::Run => None,
        At::End => whole
            .bins
            .iter()
            .rposition(Option::is_some)
            .or(Some(ncols.saturating_sub(1))),
        At::Peak => present()
            .max_by(|a, b| a.1.max.total_cmp(&b.1.max))
            .map(|p| p.0),
        At::ChangePoint => change_point(&present().map(|(i, b)| (i, b.mean())).collect::<Vec<_>>()),
    }
}

/// The split of a two-segment least-squares fit (the column where the
/// second segment starts).
pub fn change_point(points: &[(usize, f64)]) -> Option<usize> {
    let n = points.len();
    if n < 4 {
        return None;
    }
    let (mut s, mut s2) = (0.0, 0.0);
    let prefix: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
        .chain(points.iter().map(|p| {
            s += p.1;
            s2 += p.1 * p.1;
            (s, s2)
        }))
        .collect();
    let sse = |a: usize, b: usize| {
        let (s, q) = (prefix[b].0 - prefix[a].0, prefix[b].1 - prefix[a].1);
        q - s * s / (b - a) as f64
    };
    (1..n)
        .map(|k| (k, sse(0, k) + sse(k, n)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| points[k].0)
}
