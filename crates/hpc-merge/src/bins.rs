//! Per-node and job-wide time bins.
//!
//! Each node's samples are binned on an absolute grid (`floor(t / step)`) as
//! they are read, in any order; the raw samples are not kept. A bin keeps the
//! largest memory value, the mean of rates and ratios, and the latest value
//! of cumulative counters. When a node is finished its bins are turned into
//! a held (sample-and-hold) series, which is added into the job-wide
//! [`Aggregate`] and then dropped.

/// How a field combines inside one node's bin and across nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A level (memory): largest value in a bin, summed over nodes.
    Level,
    /// A rate (busy cores, MB/s, W): mean in a bin, summed over nodes.
    Rate,
    /// A cumulative counter: latest value in a bin; node increments summed.
    Cumulative,
    /// A ratio (CPI, miss rates): mean in a bin, averaged over nodes.
    Ratio,
}

/// A sample field that hpc-merge combines.
pub(crate) struct Field {
    pub name: &'static str,
    pub kind: Kind,
}

macro_rules! fields {
    ($($name:ident: $kind:ident),* $(,)?) => {
        pub(crate) const FIELDS: &[Field] = &[$(Field { name: stringify!($name), kind: Kind::$kind }),*];
        /// The values of one parsed sample, in [`FIELDS`] order (NaN = absent).
        pub(crate) fn values_of(s: &crate::input::RawSample) -> [f64; NF] {
            [$(s.$name.unwrap_or(f64::NAN)),*]
        }
    };
}

fields! {
    rss_mb: Level,
    hwm_mb: Level,
    swap_mb: Level,
    pss_mb: Level,
    gpu_mem_mb: Level,
    cpu_cores: Rate,
    read_mbps: Rate,
    write_mbps: Rate,
    lustre_read_mbps: Rate,
    lustre_write_mbps: Rate,
    lustre_meta_ops: Rate,
    power_w: Rate,
    ib_rx_mbps: Rate,
    ib_tx_mbps: Rate,
    read_mb: Cumulative,
    write_mb: Cumulative,
    cpu_user_s: Cumulative,
    cpu_sys_s: Cumulative,
    energy_j: Cumulative,
    numa_miss_rate: Ratio,
    cpi: Ratio,
    cache_miss_rate: Ratio,
    gpu_util: Ratio,
}

/// The number of combined fields.
pub(crate) const NF: usize = 23;

/// Index of a field by name (compile-time checked by the tests).
pub(crate) const fn idx(name: &str) -> usize {
    let mut i = 0;
    while i < FIELDS.len() {
        if const_eq(FIELDS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("unknown field")
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

pub(crate) const RSS: usize = idx("rss_mb");
pub(crate) const CORES: usize = idx("cpu_cores");
pub(crate) const READ_MBPS: usize = idx("read_mbps");
pub(crate) const WRITE_MBPS: usize = idx("write_mbps");
pub(crate) const LREAD: usize = idx("lustre_read_mbps");
pub(crate) const LWRITE: usize = idx("lustre_write_mbps");
pub(crate) const LMETA: usize = idx("lustre_meta_ops");
pub(crate) const POWER: usize = idx("power_w");
pub(crate) const READ_MB: usize = idx("read_mb");
pub(crate) const WRITE_MB: usize = idx("write_mb");
pub(crate) const CPU_USER: usize = idx("cpu_user_s");
pub(crate) const CPU_SYS: usize = idx("cpu_sys_s");
pub(crate) const ENERGY: usize = idx("energy_j");
pub(crate) const NUMA: usize = idx("numa_miss_rate");
pub(crate) const CPI: usize = idx("cpi");
pub(crate) const CACHE: usize = idx("cache_miss_rate");

/// The fields of each kind lie together, in this order (checked below), so
/// that the per-sample and per-bin loops run over ranges of one kind.
pub(crate) const LEVELS: std::ops::Range<usize> = 0..5;
pub(crate) const RATES: std::ops::Range<usize> = 5..14;
pub(crate) const CUMULATIVE: std::ops::Range<usize> = 14..19;
pub(crate) const RATIOS: std::ops::Range<usize> = 19..NF;

const _: () = {
    let mut k = 0;
    while k < NF {
        let ok = match FIELDS[k].kind {
            Kind::Level => k < LEVELS.end,
            Kind::Rate => k >= RATES.start && k < RATES.end,
            Kind::Cumulative => k >= CUMULATIVE.start && k < CUMULATIVE.end,
            Kind::Ratio => k >= RATIOS.start && k < RATIOS.end,
        };
        assert!(ok, "FIELDS are not grouped by kind as the ranges say");
        k += 1;
    }
    assert!(LEVELS.start == 0 && LEVELS.end == RATES.start);
    assert!(RATES.end == CUMULATIVE.start && CUMULATIVE.end == RATIOS.start);
};

/// One node's bins on the absolute grid `floor(t / step)`.
pub(crate) struct NodeBins {
    pub step: f64,
    /// Absolute index of bin 0.
    base: i64,
    /// `len * NF` values (NaN = absent): max, running sum, or latest value.
    vals: Vec<f64>,
    /// `len * NF` sample counts, for means.
    cnts: Vec<u32>,
    /// Earliest and latest sample time per bin (NaN = empty bin).
    t_first: Vec<f64>,
    t_last: Vec<f64>,
    /// Samples binned (after dropping exact duplicates).
    pub samples: u64,
    /// Exact duplicates dropped.
    pub duplicates: u64,
    /// Earliest and latest sample time.
    pub t_min: f64,
    pub t_max: f64,
    /// Largest RSS of any single sample.
    pub peak_rss: f64,
}

/// Bins more than this far from a node's first bin are refused (a bad `t`
/// must not allocate gigabytes).
pub(crate) const MAX_SPAN_S: f64 = 62.0 * 86400.0;

thread_local! {
    /// Bins of nodes already folded, kept for the thread's next node: their
    /// memory is reused instead of allocated (and page-faulted) again.
    static POOL: std::cell::RefCell<Vec<NodeBins>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl NodeBins {
    /// Empty bins of width `step`, reusing a recycled node's memory.
    pub fn new(step: f64) -> Self {
        if let Some(mut b) = POOL.with(|p| p.borrow_mut().pop()) {
            b.step = step;
            b.base = 0;
            b.vals.clear();
            b.cnts.clear();
            b.t_first.clear();
            b.t_last.clear();
            b.samples = 0;
            b.duplicates = 0;
            b.t_min = f64::INFINITY;
            b.t_max = f64::NEG_INFINITY;
            b.peak_rss = f64::NAN;
            return b;
        }
        NodeBins {
            step,
            base: 0,
            vals: Vec::new(),
            cnts: Vec::new(),
            t_first: Vec::new(),
            t_last: Vec::new(),
            samples: 0,
            duplicates: 0,
            t_min: f64::INFINITY,
            t_max: f64::NEG_INFINITY,
            peak_rss: f64::NAN,
        }
    }

    pub fn len(&self) -> usize {
        self.t_first.len()
    }

    /// Gives the memory back to this thread's pool (two at most are kept).
    pub fn recycle(self) {
        POOL.with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < 2 {
                p.push(self);
            }
        });
    }

    /// Makes room for absolute bin `abs` and returns its local index.
    fn slot(&mut self, abs: i64) -> usize {
        if self.len() == 0 {
            self.base = abs;
        }
        if abs < self.base {
            let add = (self.base - abs) as usize;
            let grow = |v: &mut Vec<f64>, per: usize, fill: f64| {
                let mut nv = vec![fill; add * per];
                nv.append(v);
                *v = nv;
            };
            grow(&mut self.vals, NF, f64::NAN);
            grow(&mut self.t_first, 1, f64::NAN);
            grow(&mut self.t_last, 1, f64::NAN);
            let mut nc = vec![0u32; add * NF];
            nc.append(&mut self.cnts);
            self.cnts = nc;
            self.base = abs;
        }
        let i = (abs - self.base) as usize;
        if i >= self.len() {
            let n = i + 1;
            self.vals.resize(n * NF, f64::NAN);
            self.cnts.resize(n * NF, 0);
            self.t_first.resize(n, f64::NAN);
            self.t_last.resize(n, f64::NAN);
        }
        i
    }

    /// Adds one sample. Returns `Err` with a reason when `t` is unusable.
    pub fn add(&mut self, t: f64, v: &[f64; NF]) -> Result<(), String> {
        if !t.is_finite() {
            return Err("t is not a finite number".into());
        }
        if self.samples > 0
            && ((t - self.t_min).abs() > MAX_SPAN_S || (t - self.t_max).abs() > MAX_SPAN_S)
        {
            return Err(format!(
                "t {t} is more than {} days away from the node's other samples",
                MAX_SPAN_S / 86400.0
            ));
        }
        let abs = (t / self.step).floor() as i64;
        let i = self.slot(abs);
        let (tf, tl) = (self.t_first[i], self.t_last[i]);
        if t == tf || t == tl {
            self.duplicates += 1;
            return Ok(());
        }
        let newest = tl.is_nan() || t > tl;
        if tf.is_nan() || t < tf {
            self.t_first[i] = t;
        }
        if newest {
            self.t_last[i] = t;
        }
        self.samples += 1;
        self.t_min = self.t_min.min(t);
        self.t_max = self.t_max.max(t);
        let row = &mut self.vals[i * NF..(i + 1) * NF];
        let cnt = &mut self.cnts[i * NF..(i + 1) * NF];
        // Branch-free per kind: an absent value (NaN) leaves the bin as is.
        for k in LEVELS {
            let (x, cur) = (v[k], row[k]);
            row[k] = if !x.is_nan() && (cur.is_nan() || x > cur) {
                x
            } else {
                cur
            };
        }
        for k in RATES.start..CUMULATIVE.start {
            let (x, cur) = (v[k], row[k]);
            row[k] = if x.is_nan() {
                cur
            } else if cur.is_nan() {
                x
            } else {
                cur + x
            };
        }
        for k in CUMULATIVE {
            let (x, cur) = (v[k], row[k]);
            row[k] = if !x.is_nan() && (cur.is_nan() || newest) {
                x
            } else {
                cur
            };
        }
        for k in RATIOS {
            let (x, cur) = (v[k], row[k]);
            row[k] = if x.is_nan() {
                cur
            } else if cur.is_nan() {
                x
            } else {
                cur + x
            };
        }
        for k in 0..NF {
            cnt[k] += u32::from(!v[k].is_nan());
        }
        if !v[RSS].is_nan() && (self.peak_rss.is_nan() || v[RSS] > self.peak_rss) {
            self.peak_rss = v[RSS];
        }
        Ok(())
    }

    /// The median time between consecutive occupied bins (their latest
    /// samples), or `None` with fewer than two occupied bins.
    pub fn median_interval(&self) -> Option<f64> {
        let mut prev = f64::NAN;
        let mut d = Vec::new();
        for &t in &self.t_last {
            if t.is_nan() {
                continue;
            }
            if !prev.is_nan() {
                d.push(t - prev);
            }
            prev = t;
        }
        if d.is_empty() {
            return None;
        }
        let m = d.len() / 2;
        let (_, med, _) = d.select_nth_unstable_by(m, |a, b| a.total_cmp(b));
        Some(*med)
    }

    /// Absolute index of the first bin.
    pub fn base(&self) -> i64 {
        self.base
    }

    /// Walks the held series bin by bin: `f(local_index, values)` where a
    /// level, rate or ratio is the bin's own value or the last one held for
    /// at most `hold_s` seconds, and a cumulative field is the increment
    /// since the node's previous value (NaN when there is none). Busy cores
    /// missing from a sample are derived from cumulative CPU seconds.
    pub fn walk(&self, hold_s: f64, mut f: impl FnMut(usize, &[f64; NF])) {
        let mut last = [f64::NAN; NF];
        let mut last_t = [f64::NAN; NF];
        let mut last_cum = [f64::NAN; NF];
        let mut prev_cpu = (f64::NAN, f64::NAN); // (t, cpu seconds)
        let mut out = [f64::NAN; NF];
        for i in 0..self.len() {
            let tl = self.t_last[i];
            let row: &[f64; NF] = self.vals[i * NF..(i + 1) * NF].try_into().unwrap();
            let cnt: &[u32; NF] = self.cnts[i * NF..(i + 1) * NF].try_into().unwrap();
            let bin_t = (self.base + i as i64) as f64 * self.step;
            // A bin's values: a level or cumulative value as it is, the
            // mean of rates and ratios (a single sample is its own). An
            // empty bin holds NaN only.
            let mean = |k: usize| {
                if cnt[k] > 1 {
                    row[k] / cnt[k] as f64
                } else {
                    row[k]
                }
            };
            let mut cores = mean(CORES);
            if !tl.is_nan() {
                let cpu = sum_present(row[CPU_USER], row[CPU_SYS]);
                if cores.is_nan() && !cpu.is_nan() && !prev_cpu.1.is_nan() {
                    let dt = tl - prev_cpu.0;
                    if dt > 0.0 && cpu >= prev_cpu.1 {
                        cores = (cpu - prev_cpu.1) / dt;
                    }
                }
                if !cpu.is_nan() {
                    prev_cpu = (tl, cpu);
                }
            }
            // Levels, rates and ratios: the value, else the last one while
            // it is held (a NaN last value gives NaN either way).
            for k in LEVELS {
                hold(
                    k,
                    row[k],
                    tl,
                    bin_t,
                    hold_s,
                    &mut last,
                    &mut last_t,
                    &mut out,
                );
            }
            for k in RATES {
                let x = if k == CORES { cores } else { mean(k) };
                hold(k, x, tl, bin_t, hold_s, &mut last, &mut last_t, &mut out);
            }
            for k in RATIOS {
                hold(
                    k,
                    mean(k),
                    tl,
                    bin_t,
                    hold_s,
                    &mut last,
                    &mut last_t,
                    &mut out,
                );
            }
            for k in CUMULATIVE {
                let x = row[k];
                let lc = last_cum[k];
                out[k] = if x.is_nan() {
                    f64::NAN
                } else if lc.is_nan() || x < lc {
                    // First value, or a counter reset: count from zero.
                    x
                } else {
                    x - lc
                };
                if !x.is_nan() {
                    last_cum[k] = x;
                }
            }
            f(i, &out);
        }
    }
}

/// One held field of [`NodeBins::walk`]: `x` when present, else the last
/// value while it is at most `hold_s` old.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn hold(
    k: usize,
    x: f64,
    tl: f64,
    bin_t: f64,
    hold_s: f64,
    last: &mut [f64; NF],
    last_t: &mut [f64; NF],
    out: &mut [f64; NF],
) {
    let have = !x.is_nan();
    out[k] = if have {
        x
    } else if bin_t - last_t[k] <= hold_s {
        last[k]
    } else {
        f64::NAN
    };
    if have {
        last[k] = x;
        last_t[k] = tl;
    }
}

/// `a + b` where an absent side counts as 0, NaN when both are absent.
pub(crate) fn sum_present(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f64::NAN,
        (true, false) => b,
        (false, true) => a,
        (false, false) => a + b,
    }
}

/// The job-wide sums of the nodes' held series, on the same absolute grid.
pub(crate) struct Aggregate {
    base: i64,
    sums: Vec<f64>,
    cnts: Vec<u16>,
}

impl Aggregate {
    pub fn new() -> Self {
        Aggregate {
            base: 0,
            sums: Vec::new(),
            cnts: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.cnts.len() / NF
    }

    pub fn base(&self) -> i64 {
        self.base
    }

    /// Makes the grid cover absolute bins `lo..=hi`.
    pub fn cover(&mut self, lo: i64, hi: i64) {
        if self.len() == 0 {
            self.base = lo;
        }
        if lo < self.base {
            let add = (self.base - lo) as usize * NF;
            let mut s = vec![0.0; add];
            s.append(&mut self.sums);
            self.sums = s;
            let mut c = vec![0u16; add];
            c.append(&mut self.cnts);
            self.cnts = c;
            self.base = lo;
        }
        let n = (hi - self.base + 1) as usize;
        if n > self.len() {
            self.sums.resize(n * NF, 0.0);
            self.cnts.resize(n * NF, 0);
        }
    }

    /// Adds one node's values at absolute bin `abs` (already covered).
    pub fn add(&mut self, abs: i64, v: &[f64; NF]) {
        let i = (abs - self.base) as usize;
        let s = &mut self.sums[i * NF..(i + 1) * NF];
        let c = &mut self.cnts[i * NF..(i + 1) * NF];
        for k in 0..NF {
            let have = !v[k].is_nan();
            s[k] = if have { s[k] + v[k] } else { s[k] };
            c[k] = c[k].saturating_add(u16::from(have));
        }
    }

    /// Adds another aggregate's sums and counts.
    pub fn merge(&mut self, other: &Aggregate) {
        let n = other.len();
        if n == 0 {
            return;
        }
        self.cover(other.base, other.base + n as i64 - 1);
        let off = (other.base - self.base) as usize * NF;
        for (j, (s, c)) in other.sums.iter().zip(&other.cnts).enumerate() {
            self.sums[off + j] += s;
            self.cnts[off + j] = self.cnts[off + j].saturating_add(*c);
        }
    }

    /// Bin `i` (local): per-field sum and node count.
    pub fn bin(&self, i: usize) -> (&[f64], &[u16]) {
        (
            &self.sums[i * NF..(i + 1) * NF],
            &self.cnts[i * NF..(i + 1) * NF],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(rss: f64, cores: f64) -> [f64; NF] {
        let mut v = [f64::NAN; NF];
        v[RSS] = rss;
        v[CORES] = cores;
        v
    }

    #[test]
    fn field_table_matches_its_length() {
        assert_eq!(FIELDS.len(), NF);
        assert_eq!(FIELDS[RSS].name, "rss_mb");
        assert_eq!(FIELDS[CACHE].name, "cache_miss_rate");
    }

    #[test]
    fn unsorted_samples_and_duplicates_bin_the_same() {
        let mut a = NodeBins::new(1.0);
        let mut b = NodeBins::new(1.0);
        for t in [10.0, 11.0, 12.0, 13.0] {
            a.add(t, &vals(t, 1.0)).unwrap();
        }
        for t in [13.0, 11.0, 10.0, 12.0, 11.0] {
            b.add(t, &vals(t, 1.0)).unwrap();
        }
        assert_eq!(b.duplicates, 1);
        let mut sa = Vec::new();
        let mut sb = Vec::new();
        a.walk(3.0, |i, v| sa.push((i, v[RSS])));
        b.walk(3.0, |i, v| sb.push((i, v[RSS])));
        assert_eq!(sa, sb);
        assert_eq!(a.median_interval(), Some(1.0));
    }

    #[test]
    fn holds_across_short_gaps_only() {
        let mut a = NodeBins::new(1.0);
        a.add(0.0, &vals(5.0, 1.0)).unwrap();
        a.add(10.0, &vals(6.0, 1.0)).unwrap();
        let mut got = Vec::new();
        a.walk(3.0, |_, v| got.push(v[RSS]));
        assert_eq!(got.len(), 11);
        assert_eq!(&got[..4], &[5.0, 5.0, 5.0, 5.0]);
        assert!(got[4].is_nan() && got[9].is_nan());
        assert_eq!(got[10], 6.0);
    }

    #[test]
    fn cumulative_fields_become_increments_and_derive_cores() {
        let mut a = NodeBins::new(1.0);
        for (t, cpu) in [(0.0, 0.0), (1.0, 2.0), (2.0, 4.0)] {
            let mut v = [f64::NAN; NF];
            v[CPU_USER] = cpu;
            a.add(t, &v).unwrap();
        }
        let mut got = Vec::new();
        a.walk(3.0, |_, v| got.push((v[CPU_USER], v[CORES])));
        assert_eq!(got[0].0, 0.0);
        assert!(got[0].1.is_nan());
        assert_eq!(got[1], (2.0, 2.0));
        assert_eq!(got[2], (2.0, 2.0));
    }

    #[test]
    fn a_wild_timestamp_is_refused() {
        let mut a = NodeBins::new(1.0);
        a.add(1.7e9, &vals(1.0, 1.0)).unwrap();
        assert!(a.add(0.0, &vals(1.0, 1.0)).is_err());
        assert!(a.add(f64::NAN, &vals(1.0, 1.0)).is_err());
    }
}
