//! The calibrated advice (issue 19): at stated 2, 3, 5 and 10 % the share
//! of warm jobs that run out lies within 0.5x-1.5x of the stated risk, and
//! at 1 % it is at most 2 %, on every trace with requests (MGnify, SAP) and
//! on synthetic traces of many seeds, for memory and for time; and the
//! advice at 5 % wastes no more than "max so far" at no higher under-share.

use std::path::Path;

use hpc_core::advice::Backtest;
use hpc_testkit::Tool;

mod common;
use common::{find, real_trace_args, records, synth, synth_args};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));
fn replay(args: &[&str]) -> Vec<Backtest> {
    let mut all = vec!["backtest", "--format", "ndjson"];
    all.extend_from_slice(args);
    let (code, out, err) = TOOL.cli(&all, "");
    assert_eq!(code, 0, "{err}");
    records(&out)
}

/// The band of item 1, for every risk ours was replayed at.
fn assert_calibrated(name: &str, recs: &[Backtest]) {
    for b in recs.iter().filter(|b| b.policy == "ours") {
        let (r, seen) = (b.risk.unwrap(), b.warm_under_share);
        let ok = if r <= 0.01 {
            seen <= 2.0 * r
        } else {
            seen >= 0.5 * r && seen <= 1.5 * r
        };
        assert!(ok, "{name}: stated {r}, observed {seen}: {b:?}");
        assert!(b.jobs > b.cold, "{name}: nothing warm");
    }
}

/// At 5 %: MAQ at least that of max so far; and at a risk whose
/// under-share is no higher than max's, a MAQ at least max's.
fn assert_beats_max_at_5(name: &str, recs: &[Backtest]) {
    let (ours, max) = (find(recs, "ours", Some(0.05)), find(recs, "max", None));
    assert!(ours.maq >= max.maq, "{name}: {ours:?} vs {max:?}");
    let equal = recs
        .iter()
        .filter(|b| b.policy == "ours")
        .any(|b| b.warm_under_share <= max.warm_under_share && b.maq >= max.maq);
    assert!(
        equal,
        "{name}: no risk of ours matches max's under-share at its MAQ: {recs:#?}"
    );
}

#[test]
fn mgnify_is_calibrated_and_beats_max_at_5_percent() {
    let args = real_trace_args("mgnify");
    let recs = replay(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_calibrated("mgnify", &recs);
    assert_beats_max_at_5("mgnify", &recs);
}

#[test]
fn mgnify_time_is_calibrated_and_meets_every_baseline_at_its_share() {
    // Runtime by lineage. The group's own tail had its jobs' levels set as
    // if each cost the group's longest run: 12.1 % ran out at a stated
    // 10 %, and at p95 x 1.2's share (4.4 %) ours had 0.292 against 0.317.
    let csv = common::trace("mgnify_metaspades_3.15.3_jobs.csv");
    let recs = replay(&[
        "--csv",
        &csv,
        "--group",
        "lineage",
        "--used",
        "wall_clock_seconds",
        "--order",
        "primary_accession",
        "--resource",
        "time",
        "--risks",
        "1,2,3,5,10,15,20",
    ]);
    for b in recs.iter().filter(|b| b.policy == "ours") {
        let (r, seen) = (b.risk.unwrap(), b.warm_under_share);
        assert!(seen <= 1.15 * r, "stated {r}, observed {seen}");
    }
    for f in hpc_model::backtest::equal_footing(&recs) {
        assert!(f.holds(), "{f:?}");
    }
}

#[test]
fn sap_builds_are_calibrated_and_beat_max_at_5_percent() {
    let args = real_trace_args("sap");
    let recs = replay(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_calibrated("sap", &recs);
    assert_beats_max_at_5("sap", &recs);
    // The trace has no runtime: every job weighs 1.
    assert!(find(&recs, "ours", Some(0.01)).cold >= 148);
}

fn synthetic(dir: &Path, seed: u64) -> String {
    let path = dir.join(format!("synth-{seed}.csv"));
    std::fs::write(&path, synth::trace(seed, 3000)).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn synthetic_memory_is_calibrated_on_every_seed() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=8 {
        let args = synth_args(&synthetic(dir.path(), seed));
        let recs = replay(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_calibrated(&format!("seed {seed}"), &recs);
        assert_beats_max_at_5(&format!("seed {seed}"), &recs);
    }
}

#[test]
fn one_loose_group_alone_runs_out_as_often_as_stated() {
    // One tool's history: a single log-normal group (log-sd 0.7), whose
    // jobs are exchangeable, so the stated risk should be met closely. The
    // group's own tail was given the risk of a job costing its largest
    // value, and the share ran at 1.3x to 1.5x the stated one.
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=5 {
        let path = dir.path().join(format!("single-{seed}.csv"));
        std::fs::write(&path, synth::shaped(seed, 3000, "single")).unwrap();
        let args = synth_args(&path.to_string_lossy());
        let recs = replay(&args.iter().map(String::as_str).collect::<Vec<_>>());
        for b in recs.iter().filter(|b| b.policy == "ours") {
            let (r, seen) = (b.risk.unwrap(), b.warm_under_share);
            assert!(
                seen >= 0.8 * r && seen <= 1.2 * r,
                "seed {seed}: stated {r}, observed {seen}"
            );
        }
    }
}

#[test]
fn synthetic_time_is_calibrated_on_every_seed() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=8 {
        let csv = synthetic(dir.path(), seed);
        let recs = replay(&[
            "--csv",
            &csv,
            "--resource",
            "time",
            "--group",
            "group",
            "--used",
            "runtime_s",
            "--request",
            "limit_s",
            "--order",
            "id",
        ]);
        assert_calibrated(&format!("time, seed {seed}"), &recs);
        let ours = find(&recs, "ours", Some(0.05));
        assert_eq!(ours.resource, "time");
        // Reserved over used hours: a limit at 3x the typical runtime
        // reserves more than the calibrated advice does.
        let asked = find(&recs, "request", None);
        assert!(ours.over_gbh < asked.over_gbh, "{ours:?} vs {asked:?}");
    }
}

#[test]
fn the_level_reached_is_reported_and_the_text_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let csv = synthetic(dir.path(), 3);
    let recs = replay(&[
        "--csv", &csv, "--group", "group", "--used", "used_mb", "--order", "id", "--risks", "5",
    ]);
    let ours = find(&recs, "ours", Some(0.05));
    let level = ours.level.expect("the level is reported");
    assert!(level > 0.0 && level < 0.5, "{ours:?}");
    let (code, out, err) = TOOL.cli(
        &[
            "backtest", "--csv", &csv, "--group", "group", "--used", "used_mb", "--order", "id",
            "--risks", "5",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(level "), "{out}");
}
