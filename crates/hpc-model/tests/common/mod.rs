//! Shared by the integration tests (each uses part of it).
#![allow(dead_code)]

use hpc_core::advice::Backtest;

pub mod synth;

/// A file of the shared real traces: `HPC_TRACES`, else `../shared/traces`
/// beside the clone (where CI and a developer have it). A test that needs
/// them fails when they are absent instead of passing without running.
pub fn trace(file: &str) -> String {
    let beside = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces");
    let dir = std::env::var("HPC_TRACES").unwrap_or_else(|_| beside.to_string());
    let path = format!("{dir}/{file}");
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is not here: the shared traces belong beside the clone (../shared/traces), or set HPC_TRACES"
    );
    path
}

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
