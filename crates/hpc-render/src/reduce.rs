//! Reduction of a long series to one bin per pixel column, keeping each
//! column's minimum and maximum, so a one-sample spike is never drawn away.

use crate::panels::Combine;

/// One column's values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// The smallest value.
    pub min: f32,
    /// The largest value.
    pub max: f32,
    /// The sum of the values.
    pub sum: f64,
    /// How many values.
    pub n: u32,
}

impl Bin {
    fn of(v: f32) -> Bin {
        Bin {
            min: v,
            max: v,
            sum: f64::from(v),
            n: 1,
        }
    }

    fn add(&mut self, v: f32) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += f64::from(v);
        self.n += 1;
    }

    /// The mean value.
    pub fn mean(&self) -> f64 {
        self.sum / f64::from(self.n)
    }
}

/// The column of time `t` among `n` columns over `span`.
pub fn column(t: f64, span: (f64, f64), n: usize) -> usize {
    let width = span.1 - span.0;
    if width <= 0.0 {
        return 0;
    }
    let c = ((t - span.0) / width * n as f64) as usize;
    c.min(n - 1)
}

/// Bins `(t, v)` into `n` columns over `span`; absent values (NaN) are
/// skipped, so a column without a value is `None`.
pub fn reduce(t: &[f64], v: &[f32], span: (f64, f64), n: usize) -> Vec<Option<Bin>> {
    let mut bins: Vec<Option<Bin>> = vec![None; n.max(1)];
    for (t, v) in t.iter().zip(v) {
        if v.is_nan() {
            continue;
        }
        match &mut bins[column(*t, span, n.max(1))] {
            Some(b) => b.add(*v),
            slot => *slot = Some(Bin::of(*v)),
        }
    }
    bins
}

/// The job-wide bins of several nodes' bins: per column, the nodes' means
/// summed (or averaged); min and max are that value. Between a node's
/// first and last values, a column without one of its samples holds its
/// latest value: nodes sampled at the same interval but not in step (or
/// more finely binned than sampled) leave columns with some nodes only,
/// which would otherwise show the job at a fraction of itself there.
pub fn combine<'a>(
    nodes: impl Iterator<Item = &'a [Option<Bin>]>,
    how: Combine,
    n: usize,
) -> Vec<Option<Bin>> {
    let mut acc: Vec<(f64, u32)> = vec![(0.0, 0); n.max(1)];
    for node in nodes {
        let end = node.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        let mut last = None;
        for (a, b) in acc.iter_mut().zip(&node[..end]) {
            if let Some(b) = b {
                last = Some(b.mean());
            }
            if let Some(v) = last {
                a.0 += v;
                a.1 += 1;
            }
        }
    }
    acc.into_iter()
        .map(|(s, k)| {
            (k > 0).then(|| {
                let v = match how {
                    Combine::Sum => s,
                    Combine::Mean => s / f64::from(k),
                };
                Bin::of(v as f32)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_sample_spike_survives_reduction() {
        let t: Vec<f64> = (0..86_400).map(f64::from).collect();
        let mut v = vec![1.0f32; t.len()];
        v[50_000] = 100.0;
        let bins = reduce(&t, &v, (0.0, 86_399.0), 800);
        let top = bins.iter().flatten().map(|b| b.max).fold(0.0, f32::max);
        assert_eq!(top, 100.0);
        assert_eq!(bins.iter().flatten().filter(|b| b.max == 100.0).count(), 1);
        assert!(bins.iter().all(|b| b.is_some()));
    }

    #[test]
    fn absent_values_leave_columns_empty() {
        let bins = reduce(&[0.0, 1.0, 2.0], &[f32::NAN, 2.0, f32::NAN], (0.0, 2.0), 3);
        assert_eq!(bins.iter().filter(|b| b.is_some()).count(), 1);
    }

    #[test]
    fn nodes_combine_by_sum_or_mean() {
        let a = [Some(Bin::of(1.0)), None];
        let b = [Some(Bin::of(3.0)), None];
        let s = combine([&a[..], &b[..]].into_iter(), Combine::Sum, 2);
        assert_eq!(s[0].unwrap().max, 4.0);
        assert!(s[1].is_none());
        let m = combine([&a[..], &b[..]].into_iter(), Combine::Mean, 2);
        assert_eq!(m[0].unwrap().max, 2.0);
    }

    #[test]
    fn nodes_out_of_step_are_summed_with_their_latest_values() {
        // Two nodes at 4 each, sampled 10 s apart and 5 s out of step, in
        // columns of 5 s: each column held one node's sample, and the sum
        // was drawn at 4, not 8.
        let t = |from: f64| {
            (0..10)
                .map(|i| from + 10.0 * f64::from(i))
                .collect::<Vec<_>>()
        };
        let v = vec![4.0f32; 10];
        let a = reduce(&t(0.0), &v, (0.0, 100.0), 20);
        let b = reduce(&t(5.0), &v, (0.0, 100.0), 20);
        let s = combine([&a[..], &b[..]].into_iter(), Combine::Sum, 20);
        // From the second node's first sample to the first node's last.
        for (i, c) in s.iter().enumerate().take(19).skip(1) {
            assert_eq!(c.unwrap().max, 8.0, "column {i}");
        }
        assert_eq!(s[0].unwrap().max, 4.0, "the second node had not started");
        // A node that ended is not carried past its last sample.
        let short = reduce(&t(0.0)[..5], &v[..5], (0.0, 100.0), 20);
        let s = combine([&short[..], &b[..]].into_iter(), Combine::Sum, 20);
        assert_eq!(s[18].unwrap().max, 4.0);
    }
}
