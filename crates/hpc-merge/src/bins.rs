//! Per-node and job-wide time bins.
//!
//! Each node's samples are binned on an absolute grid (`floor(t / step)`) as
//! they are read, in any order; the raw samples are not kept. A bin keeps the
//! largest memory value, the mean of rates and ratios, and the latest value
//! of cumulative counters. When a node is finished its bins are turned into
//! a held (sample-and-hold) series, which is added into the job-wide
//! [`Aggregate`] and then dropped.

use hpc_core::num::sum_present;

pub(crate) use crate::fields::{
    idx, Kind, CACHE, CORES, CPI, CPU_SYS, CPU_USER, CUMULATIVE, ENERGY, FIELDS, HWM, LEVELS,
    LMETA, LREAD, LWRITE, NF, NUMA, POWER, RATES, RATIOS, READ_MB, READ_MBPS, RSS, WRITE_MB,
    WRITE_MBPS,
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
    /// Largest high-water mark (`hwm_mb`: the kernel's, which a spike
    /// between two samples still reaches) of any single sample.
    pub peak_hwm: f64,
    /// The time the node's window is anchored on (NaN until it is known).
    anchor: f64,
    /// The node's meta start, a vote for the anchor.
    start_hint: f64,
    /// The first samples (time, values, line), held until the anchor is known.
    held: Vec<(f64, [f64; NF], u64)>,
    /// Samples refused so far, as (line, reason), for the reader to report.
    pub refused: Vec<(u64, String)>,
}

/// A sample more than this far from its node's anchor or from its other
/// samples is refused (a bad `t` must not allocate gigabytes).
pub(crate) const MAX_SPAN_S: f64 = 62.0 * 86400.0;

/// The most bins one series may have: 62 days at 1 s. A finer `--grid` over
/// a long job is refused sample by sample beyond it.
pub(crate) const MAX_BINS: i64 = 62 * 86400;

/// The most bins of the job-wide series, where the nodes' series meet after
/// clock alignment.
pub(crate) const MAX_JOB_BINS: i64 = 2 * MAX_BINS;

/// The largest `|t|` taken as a Unix time (the year 5138).
pub(crate) const MAX_T: f64 = 1e11;

/// How many first samples of a node (with its meta start) vote on its anchor.
const ANCHOR_SAMPLES: usize = 16;

thread_local! {
    /// Bins of nodes already folded, kept for the thread's next node: their
    /// memory is reused instead of allocated (and page-faulted) again.
    static POOL: std::cell::RefCell<Vec<NodeBins>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The anchor of a node's window from the times in `ts`: the median of the
/// largest group of them that lie within [`MAX_SPAN_S`] of one of them (the
/// earliest such time on a tie), so that one bogus time cannot move it.
fn anchor_of(ts: &[f64]) -> f64 {
    let near = |a: f64| ts.iter().filter(move |b| (a - **b).abs() <= MAX_SPAN_S);
    let mut best = (0, f64::NAN);
    for &a in ts {
        let n = near(a).count();
        if n > best.0 || (n == best.0 && a < best.1) {
            best = (n, a);
        }
    }
    let mut group: Vec<f64> = near(best.1).copied().collect();
    if group.is_empty() {
        return f64::NAN;
    }
    let m = group.len() / 2;
    let (_, med, _) = group.select_nth_unstable_by(m, |a, b| a.total_cmp(b));
    *med
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
            b.peak_hwm = f64::NAN;
            b.anchor = f64::NAN;
            b.start_hint = f64::NAN;
            b.held.clear();
            b.refused.clear();
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
            peak_hwm: f64::NAN,
            anchor: f64::NAN,
            start_hint: f64::NAN,
            held: Vec::new(),
            refused: Vec::new(),
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

    /// Makes room for absolute bin `abs` and returns its local index, or
    /// `None` when the series would grow past [`MAX_BINS`].
    fn slot(&mut self, abs: i64) -> Option<usize> {
        if self.len() == 0 {
            self.base = abs;
        }
        let last = self.base + self.len().max(1) as i64 - 1;
        if abs.max(last) - abs.min(self.base) >= MAX_BINS {
            return None;
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
        Some(i)
    }

    /// The node's meta start: one vote for the anchor of its window.
    pub fn set_start_hint(&mut self, start: f64) {
        if start.is_finite() && start.abs() <= MAX_T {
            self.start_hint = start;
        }
    }

    /// The time the node's window is anchored on, once known.
    pub fn anchor(&self) -> Option<f64> {
        (!self.anchor.is_nan()).then_some(self.anchor)
    }

    /// Adds the sample of input line `line`. The first samples are held
    /// until the window's anchor is known; a sample that is refused, now
    /// or when the held ones are placed, is added to `refused`.
    pub fn add(&mut self, t: f64, v: &[f64; NF], line: u64) {
        if !(t.is_finite() && t.abs() <= MAX_T) {
            self.refused
                .push((line, format!("t {t} is not a Unix time in seconds")));
        } else if self.anchor.is_nan() {
            self.held.push((t, *v, line));
            if self.held.len() >= ANCHOR_SAMPLES {
                self.settle();
            }
        } else if let Err(reason) = self.place(t, v) {
            self.refused.push((line, reason));
        }
    }

    /// Fixes the anchor from the held samples (and the meta start) and
    /// places them; called when enough are held and at the end of the input.
    pub fn settle(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut ts: Vec<f64> = self.held.iter().map(|h| h.0).collect();
        if !self.start_hint.is_nan() {
            ts.push(self.start_hint);
        }
        self.anchor = anchor_of(&ts);
        let held = std::mem::take(&mut self.held);
        for (t, v, line) in &held {
            if let Err(reason) = self.place(*t, v) {
                self.refused.push((*line, reason));
            }
        }
        // Keep the allocation for the next node.
        self.held = held;
        self.held.clear();
    }

    /// Bins one sample. Returns `Err` with a reason when `t` is unusable.
    fn place(&mut self, t: f64, v: &[f64; NF]) -> Result<(), String> {
        self.check_span(t)?;
        let abs = (t / self.step).floor() as i64;
        let Some(i) = self.slot(abs) else {
            return Err(format!(
                "t {t} would make the node's series longer than {MAX_BINS} bins of {} s (give a coarser --grid)",
                self.step
            ));
        };
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
        self.fold(i, v, newest);
        if !v[RSS].is_nan() && (self.peak_rss.is_nan() || v[RSS] > self.peak_rss) {
            self.peak_rss = v[RSS];
        }
        if !v[HWM].is_nan() && (self.peak_hwm.is_nan() || v[HWM] > self.peak_hwm) {
            self.peak_hwm = v[HWM];
        }
        Ok(())
    }

    /// `Err` when `t` lies more than [`MAX_SPAN_S`] from the node's anchor
    /// or from its other samples.
    fn check_span(&self, t: f64) -> Result<(), String> {
        let days = MAX_SPAN_S / 86400.0;
        if (t - self.anchor).abs() > MAX_SPAN_S {
            return Err(format!(
                "t {t} is more than {days} days away from the node's other samples (around {})",
                self.anchor
            ));
        }
        if self.samples > 0
            && ((t - self.t_min).abs() > MAX_SPAN_S || (t - self.t_max).abs() > MAX_SPAN_S)
        {
            return Err(format!(
                "t {t} is more than {days} days away from the node's other samples"
            ));
        }
        Ok(())
    }

    /// Folds the values `v` of a new sample into bin `i`, per kind; `newest`
    /// when it is the bin's latest sample so far.
    #[inline(always)]
    fn fold(&mut self, i: usize, v: &[f64; NF], newest: bool) {
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
            row[k] = sum_present(row[k], v[k]);
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
            row[k] = sum_present(row[k], v[k]);
        }
        for k in 0..NF {
            cnt[k] += u32::from(!v[k].is_nan());
        }
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
        let mut w = Walk::new(hold_s);
        for i in 0..self.len() {
            let tl = self.t_last[i];
            let row: &[f64; NF] = self.vals[i * NF..(i + 1) * NF].try_into().unwrap();
            let cnt: &[u32; NF] = self.cnts[i * NF..(i + 1) * NF].try_into().unwrap();
            let bin_t = (self.base + i as i64) as f64 * self.step;
            let cores = w.cores(mean(row, cnt, CORES), row, tl);
            w.held(row, cnt, cores, tl, bin_t);
            w.increments(row);
            f(i, &w.out);
        }
    }
}

/// A bin's value of field `k`: a level or cumulative value as it is, the
/// mean of rates and ratios (a single sample is its own). An empty bin
/// holds NaN only.
#[inline(always)]
fn mean(row: &[f64; NF], cnt: &[u32; NF], k: usize) -> f64 {
    if cnt[k] > 1 {
        row[k] / cnt[k] as f64
    } else {
        row[k]
    }
}

/// What [`NodeBins::walk`] carries from one bin to the next.
struct Walk {
    hold_s: f64,
    /// Per field, the last value present and its time.
    last: [f64; NF],
    last_t: [f64; NF],
    /// Per cumulative field, the last value present.
    last_cum: [f64; NF],
    /// The time and CPU seconds of the last bin that had them.
    prev_cpu: (f64, f64),
    /// The values given for the current bin.
    out: [f64; NF],
}

impl Walk {
    fn new(hold_s: f64) -> Self {
        Walk {
            hold_s,
            last: [f64::NAN; NF],
            last_t: [f64::NAN; NF],
            last_cum: [f64::NAN; NF],
            prev_cpu: (f64::NAN, f64::NAN),
            out: [f64::NAN; NF],
        }
    }

    /// The bin's busy cores: `cores` when present, else derived from the
    /// CPU seconds since the previous bin that had them.
    #[inline(always)]
    fn cores(&mut self, mut cores: f64, row: &[f64; NF], tl: f64) -> f64 {
        if tl.is_nan() {
            return cores;
        }
        let cpu = sum_present(row[CPU_USER], row[CPU_SYS]);
        if cores.is_nan() && !cpu.is_nan() && !self.prev_cpu.1.is_nan() {
            let dt = tl - self.prev_cpu.0;
            if dt > 0.0 && cpu >= self.prev_cpu.1 {
                cores = (cpu - self.prev_cpu.1) / dt;
            }
        }
        if !cpu.is_nan() {
            self.prev_cpu = (tl, cpu);
        }
        cores
    }

    /// Levels, rates and ratios: the value, else the last one while it is
    /// held (a NaN last value gives NaN either way).
    #[inline(always)]
    fn held(&mut self, row: &[f64; NF], cnt: &[u32; NF], cores: f64, tl: f64, bin_t: f64) {
        for k in LEVELS {
            self.hold(k, row[k], tl, bin_t);
        }
        for k in RATES {
            let x = if k == CORES { cores } else { mean(row, cnt, k) };
            self.hold(k, x, tl, bin_t);
        }
        for k in RATIOS {
            self.hold(k, mean(row, cnt, k), tl, bin_t);
        }
    }

    /// One held field: `x` when present, else the last value while it is
    /// at most `hold_s` old.
    #[inline(always)]
    fn hold(&mut self, k: usize, x: f64, tl: f64, bin_t: f64) {
        let have = !x.is_nan();
        self.out[k] = if have {
            x
        } else if bin_t - self.last_t[k] <= self.hold_s {
            self.last[k]
        } else {
            f64::NAN
        };
        if have {
            self.last[k] = x;
            self.last_t[k] = tl;
        }
    }

    /// Cumulative fields: the increment since the previous value.
    #[inline(always)]
    fn increments(&mut self, row: &[f64; NF]) {
        for k in CUMULATIVE {
            let x = row[k];
            let lc = self.last_cum[k];
            self.out[k] = if x.is_nan() {
                f64::NAN
            } else if lc.is_nan() {
                // The first value: count from zero.
                x
            } else {
                // A counter that fell lost a process from the summed set
                // (what it used was counted) or started again: nothing new,
                // counting on from the lower value (at most one interval of
                // a new counter is lost). Counted as a reset, 104 then 103.5
                // added the whole 103.5 again.
                (x - lc).max(0.0)
            };
            if !x.is_nan() {
                self.last_cum[k] = x;
            }
        }
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

    /// Makes the grid cover absolute bins `lo..=hi`; `false` (and nothing
    /// changed) when the grid would grow past [`MAX_JOB_BINS`].
    #[must_use]
    pub fn cover(&mut self, lo: i64, hi: i64) -> bool {
        if self.len() == 0 {
            self.base = lo;
        }
        let last = self.base + self.len().max(1) as i64 - 1;
        if hi.max(last) - lo.min(self.base) >= MAX_JOB_BINS {
            return false;
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
        true
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

    /// Adds another aggregate's sums and counts; `false` when together
    /// they would span more than [`MAX_JOB_BINS`].
    #[must_use]
    pub fn merge(&mut self, other: &Aggregate) -> bool {
        let n = other.len();
        if n == 0 {
            return true;
        }
        if !self.cover(other.base, other.base + n as i64 - 1) {
            return false;
        }
        let off = (other.base - self.base) as usize * NF;
        for (j, (s, c)) in other.sums.iter().zip(&other.cnts).enumerate() {
            self.sums[off + j] += s;
            self.cnts[off + j] = self.cnts[off + j].saturating_add(*c);
        }
        true
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
    fn unsorted_samples_and_duplicates_bin_the_same() {
        let mut a = NodeBins::new(1.0);
        let mut b = NodeBins::new(1.0);
        for t in [10.0, 11.0, 12.0, 13.0] {
            a.add(t, &vals(t, 1.0), 0);
        }
        for t in [13.0, 11.0, 10.0, 12.0, 11.0] {
            b.add(t, &vals(t, 1.0), 0);
        }
        a.settle();
        b.settle();
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
        a.add(0.0, &vals(5.0, 1.0), 0);
        a.add(10.0, &vals(6.0, 1.0), 0);
        a.settle();
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
            a.add(t, &v, 0);
        }
        a.settle();
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
        a.add(1.7e9, &vals(1.0, 1.0), 1);
        a.settle();
        a.add(0.0, &vals(1.0, 1.0), 2);
        a.add(f64::NAN, &vals(1.0, 1.0), 3);
        a.add(1e300, &vals(1.0, 1.0), 4);
        let lines: Vec<u64> = a.refused.iter().map(|r| r.0).collect();
        assert_eq!(lines, [2, 3, 4]);
        assert_eq!(a.samples, 1);
    }

    #[test]
    fn one_bogus_first_sample_does_not_anchor_the_window() {
        for bogus in [0.0, 4.1e9] {
            let mut a = NodeBins::new(1.0);
            a.add(bogus, &vals(9.0, 1.0), 1);
            for i in 0..40u32 {
                a.add(1.7e9 + f64::from(i), &vals(1.0, 1.0), 2 + u64::from(i));
            }
            a.settle();
            assert_eq!(a.refused.len(), 1, "{:?}", a.refused);
            assert_eq!(a.refused[0].0, 1);
            assert_eq!((a.samples, a.peak_rss, a.t_min), (40, 1.0, 1.7e9));
        }
        // Fewer samples than the vote: the meta start breaks the tie.
        let mut a = NodeBins::new(1.0);
        a.set_start_hint(1.7e9);
        a.add(4.1e9, &vals(9.0, 1.0), 1);
        a.add(1.7e9 + 1.0, &vals(1.0, 1.0), 2);
        a.settle();
        assert_eq!(a.refused.len(), 1);
        assert_eq!(a.anchor(), Some(1.7e9 + 1.0));
    }

    #[test]
    fn a_series_is_bounded_in_bins() {
        let mut a = NodeBins::new(0.001);
        a.add(1.7e9, &vals(1.0, 1.0), 1);
        a.settle();
        // An hour at 1 ms is within the bound, two hours are not.
        a.add(1.7e9 + 3600.0, &vals(1.0, 1.0), 2);
        a.add(1.7e9 + 7200.0, &vals(1.0, 1.0), 3);
        assert_eq!(a.samples, 2);
        assert_eq!(a.refused.len(), 1);
        assert!(a.refused[0].1.contains("coarser --grid"), "{:?}", a.refused);
        assert!(a.len() as i64 <= MAX_BINS);
        let mut g = Aggregate::new();
        assert!(g.cover(0, 10));
        assert!(!g.cover(0, MAX_JOB_BINS));
        assert!(!g.cover(-MAX_JOB_BINS, 0));
        assert_eq!(g.len(), 11);
    }
}
