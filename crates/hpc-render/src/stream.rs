//! What a stream holds, gathered for drawing: each job's sample series (by
//! host, and the job-wide one), job records, flags, summaries, report rows,
//! recommendations and backtests.

use std::borrow::Cow;
use std::collections::BTreeMap;

use hpc_core::advice::{Backtest, Rec};
use hpc_core::fields::index_of;
use hpc_core::record::{from_line, Flag, Job, Meta, Sample, Summary};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The plotted quantities of a sample, in the order of [`Series::cols`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// RSS in GiB.
    RssGb,
    /// Busy cores.
    Cores,
    /// Disk read MiB/s.
    ReadMbps,
    /// Disk write MiB/s.
    WriteMbps,
    /// Threads.
    Threads,
    /// Lustre read + write MiB/s.
    Lustre,
    /// NUMA miss rate.
    Numa,
}

/// How many [`Col`]s there are.
pub const NCOLS: usize = 7;

/// A line read once: its kind, and the sample fields that are drawn (the
/// other fields are skipped by the parser, and other kinds parsed again as
/// their record type).
#[derive(Deserialize)]
struct LineView<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    t: Option<f64>,
    #[serde(borrow, default)]
    host: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "job_id_de")]
    job_id: Option<Cow<'a, str>>,
    #[serde(default)]
    rss_mb: Option<f64>,
    #[serde(default)]
    cpu_cores: Option<f64>,
    #[serde(default)]
    read_mbps: Option<f64>,
    #[serde(default)]
    write_mbps: Option<f64>,
    #[serde(default)]
    threads: Option<f64>,
    #[serde(default)]
    lustre_read_mbps: Option<f64>,
    #[serde(default)]
    lustre_write_mbps: Option<f64>,
    #[serde(default)]
    numa_miss_rate: Option<f64>,
}

// The sample fields LineView reads are hpc-core's: a name that is not in
// its sample table fails the build (a panel would otherwise go quietly
// "not measured" after a rename).
const _: () = {
    let f = Sample::FIELDS;
    let _ = [
        index_of(f, "t"),
        index_of(f, "host"),
        index_of(f, "rss_mb"),
        index_of(f, "cpu_cores"),
        index_of(f, "read_mbps"),
        index_of(f, "write_mbps"),
        index_of(f, "threads"),
        index_of(f, "lustre_read_mbps"),
        index_of(f, "lustre_write_mbps"),
        index_of(f, "numa_miss_rate"),
    ];
};

/// A job id written as a string (borrowed when it can be) or a number.
fn job_id_de<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct Id;
    impl<'de> serde::de::Visitor<'de> for Id {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a job id (string or number)")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(Id)
}

/// The plotted values of one sample; NaN where the source is absent.
fn values(s: &LineView) -> [f32; NCOLS] {
    let v = |x: Option<f64>| x.map_or(f32::NAN, |x| x as f32);
    let lustre = hpc_core::num::sum_present(
        s.lustre_read_mbps.unwrap_or(f64::NAN),
        s.lustre_write_mbps.unwrap_or(f64::NAN),
    );
    [
        v(s.rss_mb.map(|m| m / 1024.0)),
        v(s.cpu_cores),
        v(s.read_mbps),
        v(s.write_mbps),
        v(s.threads),
        lustre as f32,
        v(s.numa_miss_rate),
    ]
}

/// One host's (or the job-wide) series, column-wise.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Unix seconds.
    pub t: Vec<f64>,
    /// One vector per [`Col`], NaN where absent.
    pub cols: [Vec<f32>; NCOLS],
}

impl Series {
    /// Appends one sample at time `t`.
    fn push(&mut self, t: f64, s: &LineView) {
        self.t.push(t);
        for (col, v) in self.cols.iter_mut().zip(values(s)) {
            col.push(v);
        }
    }

    /// The values of one column.
    pub fn col(&self, c: Col) -> &[f32] {
        &self.cols[c as usize]
    }
}

/// The samples of one job.
#[derive(Debug, Clone, Default)]
pub struct JobSeries {
    /// Per host (samples with a `host`).
    pub hosts: BTreeMap<String, Series>,
    /// The job-wide series (samples without a `host`, as hpc-merge writes).
    pub aggregate: Option<Series>,
    /// Requested memory (MiB) and CPUs by host, from the metas.
    pub meta_req: BTreeMap<String, (Option<f64>, Option<u32>)>,
}

impl JobSeries {
    /// Every series, the job-wide one first.
    pub fn all(&self) -> impl Iterator<Item = &Series> {
        self.aggregate.iter().chain(self.hosts.values())
    }

    /// The first and last sample time.
    pub fn span(&self) -> Option<(f64, f64)> {
        let mut span: Option<(f64, f64)> = None;
        for t in self.all().flat_map(|s| s.t.iter()) {
            let (lo, hi) = span.unwrap_or((*t, *t));
            span = Some((lo.min(*t), hi.max(*t)));
        }
        span
    }
}

/// Everything read from a stream.
#[derive(Debug, Default)]
pub struct Stream {
    /// Sample series by job id (`""` for samples without one).
    pub series: BTreeMap<String, JobSeries>,
    /// Job ids in the order their first sample or meta came.
    pub series_order: Vec<String>,
    /// Job records.
    pub jobs: Vec<Job>,
    /// Flag records.
    pub flags: Vec<Flag>,
    /// Summary records.
    pub summaries: Vec<Summary>,
    /// Report rows (`hpc-store report --format ndjson`).
    pub reports: Vec<Map<String, Value>>,
    /// Recommendation records (hpc-model's `rec`).
    pub recs: Vec<Rec>,
    /// Backtest records (`hpc-model backtest --format ndjson`).
    pub backtests: Vec<Backtest>,
}

impl Stream {
    /// Adds one record line; says why it is bad. Kinds that are not drawn
    /// are ignored.
    pub fn add(&mut self, text: &str) -> Result<(), String> {
        let v: LineView = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let typed = |e: serde_json::Error| e.to_string();
        match v.kind.as_deref() {
            None => return Err("no \"kind\"".into()),
            Some("sample") => {
                // Unix seconds (up to the year 5138), and readings no
                // meter gives are refused: 1e39 MiB overflowed the plot's
                // f32 to inf and -1e12 s drew a run of 277777777 h.
                let t =
                    v.t.filter(|t| (0.0..=1e11).contains(t))
                        .ok_or("sample: t is not Unix seconds (a number from 0 to 1e11)")?;
                for (name, x) in [
                    ("rss_mb", v.rss_mb),
                    ("cpu_cores", v.cpu_cores),
                    ("read_mbps", v.read_mbps),
                    ("write_mbps", v.write_mbps),
                    ("threads", v.threads),
                    ("lustre_read_mbps", v.lustre_read_mbps),
                    ("lustre_write_mbps", v.lustre_write_mbps),
                    ("numa_miss_rate", v.numa_miss_rate),
                ] {
                    if let Some(x) = x.filter(|x| !(0.0..=1e15).contains(x)) {
                        return Err(format!(
                            "sample: {name} {x} is not a reading from 0 to 1e15"
                        ));
                    }
                }
                let job = self.job_series(v.job_id.as_deref());
                match &v.host {
                    Some(h) => match job.hosts.get_mut(h.as_ref()) {
                        Some(series) => series.push(t, &v),
                        None => job.hosts.entry(h.to_string()).or_default().push(t, &v),
                    },
                    None => job
                        .aggregate
                        .get_or_insert_with(Series::default)
                        .push(t, &v),
                }
            }
            Some("meta") => {
                let m: Meta = from_line(text)?;
                let job = self.job_series(m.job_id.as_deref());
                job.meta_req.insert(m.host, (m.req_mem_mb, m.req_cpus));
            }
            Some("job") => self
                .jobs
                .push(serde_json::from_str::<Job>(text).map_err(typed)?),
            Some("flag") => self
                .flags
                .push(serde_json::from_str::<Flag>(text).map_err(typed)?),
            Some("summary") => self.summaries.push(from_line(text)?),
            Some("report") => self.reports.push(object(text)?),
            Some("rec") => self.recs.push(from_line(text)?),
            Some("backtest") => self.backtests.push(backtest(text)?),
            Some(_) => {}
        }
        Ok(())
    }

    fn job_series(&mut self, id: Option<&str>) -> &mut JobSeries {
        let id = id.unwrap_or("");
        if !self.series.contains_key(id) {
            self.series_order.push(id.to_string());
        }
        self.series.entry(id.to_string()).or_default()
    }

    /// Whether no record that is drawn was read (backtests aside).
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
            && self.series.is_empty()
            && self.flags.is_empty()
            && self.summaries.is_empty()
            && self.reports.is_empty()
            && self.recs.is_empty()
    }

    /// The job record of a job id (its `job_id` or `job_id_raw`).
    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs
            .iter()
            .find(|j| j.job_id == id || j.job_id_raw == id)
    }

    /// The job-wide summary of a job id.
    pub fn summary(&self, id: &str) -> Option<&Summary> {
        self.summaries
            .iter()
            .find(|s| s.job_id == id && s.host.is_none())
    }

    /// The flags of a job (by its `job_id` or `job_id_raw`).
    pub fn flags_of<'a>(&'a self, job: &'a str, raw: &'a str) -> impl Iterator<Item = &'a Flag> {
        self.flags
            .iter()
            .filter(move |f| f.job_id == job || f.job_id == raw)
    }
}

/// A backtest record whose stated risk, when given, is a fraction in
/// (0, 1) (a percentage written by mistake would draw nonsense).
fn backtest(text: &str) -> Result<Backtest, String> {
    let b: Backtest = from_line(text)?;
    match b.risk {
        Some(r) if !(r > 0.0 && r < 1.0) => {
            Err(format!("backtest: risk {r} is not a fraction in (0, 1)"))
        }
        _ => Ok(b),
    }
}

fn object(text: &str) -> Result<Map<String, Value>, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}
