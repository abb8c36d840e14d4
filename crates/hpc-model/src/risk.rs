//! What the sizer of [`crate::calib`] and the baselines rest on: a past
//! value (observed or censored), the rank of a split conformal bound, sample
//! quantiles, and the normal and Student-t functions.

/// One past value: what a job used, or (censored) a limit it ran past.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The value (MiB, seconds, ...), > 0.
    pub value: f64,
    /// True when the job needed more than `value` (killed at its limit).
    pub censored: bool,
}

impl Point {
    /// An observed value.
    pub fn seen(value: f64) -> Point {
        Point {
            value,
            censored: false,
        }
    }
}

/// The rank k (1-based) of the order statistic that a new exchangeable value
/// exceeds with probability (n + 1 - k)/(n + 1) <= r; `None` when even the
/// largest of n cannot reach r (n + 1 < 1/r).
pub fn rank(n: usize, r: f64) -> Option<usize> {
    let k = ((1.0 - r) * (n as f64 + 1.0) - 1e-9).ceil().max(1.0) as usize;
    (k <= n).then_some(k)
}

/// Mean and sample (n - 1) standard deviation.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
    (mean, (ss / (n - 1.0)).sqrt())
}

/// The plain sample quantile of sorted values (linear interpolation between
/// order statistics, type 7), as the baseline policies use it.
pub fn sample_quantile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let h = (n - 1) as f64 * p.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
        }
    }
}

/// The standard normal density.
pub fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The `p` quantile (0 < p < 1) of the standard normal distribution, by
/// bisection on [`normal_cdf`] (to 1e-9).
pub fn normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-12.0f64, 12.0f64);
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The standard normal distribution function (erfc by its Chebyshev fit,
/// relative error below 1.2e-7).
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

/// ln Gamma(x) for x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued
/// fraction (modified Lentz).
fn inc_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - inc_beta(1.0 - x, b, a);
    }
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    d = 1.0 / if d.abs() < tiny { tiny } else { d };
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            d = 1.0 / if d.abs() < tiny { tiny } else { d };
            c = 1.0 + num / c;
            c = if c.abs() < tiny { tiny } else { c };
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-14 {
            break;
        }
    }
    front * f / a
}

/// The Student-t distribution function with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / (df + t * t), df / 2.0, 0.5);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile of the chi-square distribution with `k` degrees of
/// freedom, by the Wilson-Hilferty cube of a normal quantile: within 3 %
/// from k = 10; for fewer and a small p, below the true quantile (k = 3,
/// p = 0.01: 0.075 for 0.115), which only widens a bound divided by it. At
/// least 1e-9 k.
pub fn chi2_quantile(k: f64, p: f64) -> f64 {
    let c = 2.0 / (9.0 * k);
    let root = 1.0 - c + normal_quantile(p) * c.sqrt();
    k * root.max(1e-3).powi(3)
}

/// The `p` quantile (0.5 < p < 1) of Student's t with `df` degrees of
/// freedom, by bisection on [`t_cdf`] (to 1e-10).
pub fn t_quantile(df: f64, p: f64) -> f64 {
    thread_local! {
        static MEMO: std::cell::RefCell<std::collections::HashMap<(u64, u64), f64>> =
            Default::default();
    }
    let key = (df.to_bits(), p.to_bits());
    if let Some(q) = MEMO.with(|m| m.borrow().get(&key).copied()) {
        return q;
    }
    let q = t_quantile_uncached(df, p);
    MEMO.with(|m| m.borrow_mut().insert(key, q));
    q
}

fn t_quantile_uncached(df: f64, p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_cdf(hi, df) < p && hi < 1e12 {
        lo = hi;
        hi *= 2.0;
    }
    while hi - lo > 1e-10 * hi.max(1.0) {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi2_quantiles_are_within_a_few_per_cent_of_the_tables() {
        // Known values: chi2(10, 0.01) = 2.5582, chi2(20, 0.01) = 8.2604,
        // chi2(99, 0.01) = 69.230, chi2(10, 0.99) = 23.209.
        for (k, p, want) in [
            (10.0, 0.01, 2.5582),
            (20.0, 0.01, 8.2604),
            (99.0, 0.01, 69.230),
            (10.0, 0.99, 23.209),
        ] {
            let got = chi2_quantile(k, p);
            assert!((got / want - 1.0).abs() < 0.03, "{k} {p}: {got}");
        }
        // With fewer degrees of freedom, below the true quantile (which
        // only widens a bound divided by it): chi2(1, 0.01) = 0.000157,
        // chi2(3, 0.01) = 0.1148, chi2(5, 0.01) = 0.5543.
        for (k, want) in [(1.0, 0.000157), (3.0, 0.1148), (5.0, 0.5543)] {
            let got = chi2_quantile(k, 0.01);
            assert!(got > 0.0 && got < want, "{k}: {got}");
        }
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Known values: t(4, 0.99) = 3.7469, t(9, 0.995) = 3.2498,
        // t(1, 0.975) = 12.706, t(30, 0.95) = 1.6973.
        for (df, p, want) in [
            (4.0, 0.99, 3.7469),
            (9.0, 0.995, 3.2498),
            (1.0, 0.975, 12.706),
            (30.0, 0.95, 1.6973),
        ] {
            let got = t_quantile(df, p);
            assert!(
                (got - want).abs() < 2e-3,
                "t({df}, {p}) = {got}, want {want}"
            );
        }
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }

    #[test]
    fn the_order_statistic_needs_n_of_at_least_one_over_r_minus_one() {
        // A new job exceeds the largest of 5 with chance 1/6: not 1 %.
        assert_eq!(rank(5, 0.01), None);
        assert_eq!(rank(98, 0.01), None);
        assert_eq!(rank(99, 0.01), Some(99));
        assert_eq!(rank(199, 0.01), Some(198));
        assert_eq!(rank(19, 0.05), Some(19));
    }

    #[test]
    fn the_normal_quantile_inverts_the_distribution_function() {
        for (p, want) in [
            (0.5, 0.0),
            (0.975, 1.959_964),
            (0.99, 2.326_348),
            (0.1, -1.281_552),
        ] {
            assert!((normal_quantile(p) - want).abs() < 1e-5, "{p}");
        }
    }
}
