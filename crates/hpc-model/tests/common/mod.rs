//! Shared by the integration tests (each uses part of it).
#![allow(dead_code)]

use hpc_core::advice::Backtest;

pub mod synth;

/// A file of the real traces: `HPC_TRACES` when set, else the repository's
/// own copies in `tests/data/traces` (its README gives their sources). A
/// test that needs one fails when it is absent instead of passing without
/// running.
pub fn trace(file: &str) -> String {
    let bundled = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/traces");
    let dir = std::env::var("HPC_TRACES").unwrap_or_else(|_| bundled.to_string());
    let path = format!("{dir}/{file}");
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is not here: the traces live in tests/data/traces of the clone, or set HPC_TRACES"
    );
    path
}

/// The backtest arguments of the real traces, as the benches replay them:
/// MGnify (its preset), the SAP builds (grouped by build definition, no
/// runtime) and the WfCommons traces `bwa` and `montage` (by process).
pub fn real_trace_args(name: &str) -> Vec<String> {
    let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match name {
        "mgnify" => own(&[
            "--csv",
            &trace("mgnify_metaspades_3.15.3_jobs.csv"),
            "--mgnify",
            &trace("mgnify_memory_heuristics.tsv"),
        ]),
        "sap" => own(&[
            "--csv",
            &trace("sap_build_memory.csv"),
            "--group",
            "group",
            "--used",
            "peak_mb",
            "--request",
            "request_mb",
            "--order",
            "order",
        ]),
        wf => own(&[
            "--csv",
            &trace(&format!(
                "wfcommons_{}.csv",
                if wf == "bwa" {
                    "makeflow_bwa"
                } else {
                    "pegasus_montage"
                }
            )),
            "--group",
            "process",
            "--used",
            "used_mb",
            "--runtime",
            "runtime_s",
            "--order",
            "order",
        ]),
    }
}

/// The backtest arguments of a synthetic trace (`synth`) written to `csv`:
/// memory, with requests, runtimes and input sizes.
pub fn synth_args(csv: &str) -> Vec<String> {
    [
        "--csv",
        csv,
        "--group",
        "group",
        "--used",
        "used_mb",
        "--request",
        "request_mb",
        "--runtime",
        "runtime_s",
        "--order",
        "id",
        "--input",
        "input_mb",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
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
