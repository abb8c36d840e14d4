//! Least-squares regressions (smartcore) of a job's peak memory or CPU time
//! on its input size and CPUs, with the distribution of their residuals.

use serde::{Deserialize, Serialize};
use smartcore::linalg::basic::matrix::DenseMatrix;
use smartcore::linear::linear_regression::{LinearRegression, LinearRegressionParameters};

use crate::risk;

/// The residual quantiles a model keeps: p = 0, 0.005, ..., 1.
pub const GRID: usize = 201;

/// A fitted linear model `y = intercept + sum(coef_i x_i)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    /// The intercept.
    pub intercept: f64,
    /// One coefficient per feature (0 for a feature that did not vary).
    pub coef: Vec<f64>,
    /// Jobs fitted on.
    pub n: usize,
    /// Root mean square of the residuals.
    pub rmse: f64,
    /// Mean of the residuals (0 up to rounding for least squares).
    pub resid_mean: f64,
    /// Sample standard deviation of the residuals.
    pub resid_sd: f64,
    /// Residual quantiles at p = i / (GRID - 1).
    pub resid_q: Vec<f64>,
    /// The largest value of each feature fitted on: a prediction clamps its
    /// features to [0, 2 x this] (empty in models written before it).
    #[serde(default)]
    pub x_max: Vec<f64>,
}

impl Linear {
    /// The prediction for `x`.
    pub fn predict(&self, x: &[f64]) -> f64 {
        let clamp = |i: usize, v: f64| match self.x_max.get(i) {
            Some(m) => v.clamp(0.0, 2.0 * m.max(0.0)),
            None => v,
        };
        self.intercept
            + self
                .coef
                .iter()
                .zip(x)
                .enumerate()
                .map(|(i, (c, v))| c * clamp(i, *v))
                .sum::<f64>()
    }

    /// The residual a new job stays under with probability 1 - r: the
    /// (1 - r) quantile of the residuals when n + 1 >= 1/r, else the
    /// normal-t predictive bound mean + t(n-1, 1-r) sd sqrt(1 + 1/n).
    pub fn error_at(&self, r: f64) -> f64 {
        if risk::rank(self.n, r).is_some() {
            let pos = (1.0 - r) * (GRID - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(GRID - 1);
            let f = pos - lo as f64;
            return self.resid_q[lo] + f * (self.resid_q[hi] - self.resid_q[lo]);
        }
        let t = risk::t_quantile((self.n.max(2) - 1) as f64, 1.0 - r);
        self.resid_mean + t * self.resid_sd * (1.0 + 1.0 / self.n as f64).sqrt()
    }
}

/// Fits `ys` on the rows `xs` (all of one width) by least squares. Features
/// that do not vary get coefficient 0 (the solver needs a full-rank
/// matrix). `None` with fewer than 2 rows or when the solver fails.
pub fn fit(xs: &[Vec<f64>], ys: &[f64]) -> Option<Linear> {
    let n = ys.len();
    if n < 2 || xs.len() != n {
        return None;
    }
    let width = xs[0].len();
    let varying: Vec<usize> = (0..width)
        .filter(|&c| xs.iter().any(|r| (r[c] - xs[0][c]).abs() > 1e-9))
        .collect();
    let mut coef = vec![0.0; width];
    let intercept = if varying.is_empty() {
        ys.iter().sum::<f64>() / n as f64
    } else {
        let rows: Vec<Vec<f64>> = xs
            .iter()
            .map(|r| varying.iter().map(|&c| r[c]).collect())
            .collect();
        let m = DenseMatrix::from_2d_vec(&rows).ok()?;
        let y = ys.to_vec();
        let lr = LinearRegression::fit(&m, &y, LinearRegressionParameters::default()).ok()?;
        let c = lr.coefficients();
        for (i, &col) in varying.iter().enumerate() {
            coef[col] = *smartcore::linalg::basic::arrays::Array::get(c, (i, 0));
        }
        *lr.intercept()
    };
    let mut model = Linear {
        intercept,
        coef,
        n,
        rmse: 0.0,
        resid_mean: 0.0,
        resid_sd: 0.0,
        resid_q: Vec::new(),
        x_max: (0..width)
            .map(|c| xs.iter().map(|r| r[c]).fold(f64::NEG_INFINITY, f64::max))
            .collect(),
    };
    if !(model.intercept.is_finite() && model.coef.iter().all(|c| c.is_finite())) {
        return None;
    }
    let mut resid: Vec<f64> = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| y - model.predict(x))
        .collect();
    if !resid.iter().all(|r| r.is_finite()) {
        return None;
    }
    resid.sort_by(f64::total_cmp);
    model.rmse = (resid.iter().map(|r| r * r).sum::<f64>() / n as f64).sqrt();
    (model.resid_mean, model.resid_sd) = risk::mean_sd(&resid);
    model.resid_q = (0..GRID)
        .map(|i| risk::sample_quantile(&resid, i as f64 / (GRID - 1) as f64))
        .collect();
    Some(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_line_and_ignores_a_constant_feature() {
        let xs: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64, 4.0]).collect();
        let ys: Vec<f64> = (0..20)
            .map(|i| 100.0 + 3.0 * i as f64 + (i % 2) as f64)
            .collect();
        let m = fit(&xs, &ys).unwrap();
        assert!((m.coef[0] - 3.0).abs() < 0.05, "{m:?}");
        assert_eq!(m.coef[1], 0.0);
        assert!((m.predict(&[10.0, 4.0]) - 130.5).abs() < 0.5);
        assert!(m.rmse > 0.4 && m.rmse < 0.6);
        assert_eq!(m.resid_q.len(), GRID);
        assert!(m.error_at(0.01) > m.error_at(0.5));
    }

    #[test]
    fn predictions_stay_within_twice_the_fitted_range_and_nan_is_not_fitted() {
        let xs: Vec<Vec<f64>> = (0..=10).map(|i| vec![10.0 * i as f64]).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 1000.0 + 3.0 * x[0]).collect();
        let m = fit(&xs, &ys).unwrap();
        assert_eq!(m.x_max, vec![100.0]);
        assert!(
            (m.predict(&[1e6]) - 1600.0).abs() < 1e-6,
            "{}",
            m.predict(&[1e6])
        );
        assert!((m.predict(&[-50.0]) - 1000.0).abs() < 1e-6);
        let mut bad = ys.clone();
        bad[3] = f64::NAN;
        assert!(
            fit(&xs, &bad).is_none(),
            "a non-finite model is never written"
        );
    }
}
