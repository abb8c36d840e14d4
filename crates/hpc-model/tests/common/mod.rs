//! Shared by the integration tests (each uses part of it).
#![allow(dead_code)]

use hpc_core::advice::Backtest;

pub mod synth;

/// Where the shared real traces live.
pub const TRACES: &str = "/work/shared/traces";

/// The backtest records of an ndjson output.
pub fn records(stdout: &str) -> Vec<Backtest> {
    stdout
        .lines()
        .map(|l| hpc_core::record::from_line(l).unwrap())
        .collect()
}

/// The record of `policy` at `risk` (a fraction).
pub fn find<'a>(recs: &'a [Backtest], policy: &str, risk: Option<f64>) -> &'a Backtest {
    let key = |r: Option<f64>| r.map(|r| (r * 1e4).round());
    recs.iter()
        .find(|b| b.policy == policy && key(b.risk) == key(risk))
        .unwrap_or_else(|| panic!("no {policy} {risk:?}"))
}
