//! Small numeric helpers the tools share: the rounding of written values and
//! the sum of two values either of which may be absent.

/// `v` rounded to 6 decimals, as the tools write derived values (rates,
/// seconds, MiB). Values of 1e12 or more in size, NaN and the infinities are
/// returned as they are: scaling them would only add rounding error.
pub fn round6(v: f64) -> f64 {
    if v.abs() < 1e12 {
        (v * 1e6).round() / 1e6
    } else {
        v
    }
}

/// `a + b` where an absent side (NaN) counts as 0; NaN when both are absent.
/// For `Option`s, pass `a.unwrap_or(f64::NAN)`. Inlined: hpc-merge adds
/// every bin with it.
#[inline]
pub fn sum_present(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f64::NAN,
        (true, false) => b,
        (false, true) => a,
        (false, false) => a + b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round6_rounds_to_six_decimals_and_leaves_huge_values() {
        assert_eq!(round6(0.123_456_789), 0.123_457);
        assert_eq!(round6(-2.000_000_4), -2.0);
        assert_eq!(round6(1e13 + 0.5), 1e13 + 0.5);
        assert!(round6(f64::NAN).is_nan());
        assert_eq!(round6(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn sum_present_counts_an_absent_side_as_zero() {
        assert_eq!(sum_present(1.5, 2.0), 3.5);
        assert_eq!(sum_present(f64::NAN, 2.0), 2.0);
        assert_eq!(sum_present(1.5, f64::NAN), 1.5);
        assert!(sum_present(f64::NAN, f64::NAN).is_nan());
    }
}
