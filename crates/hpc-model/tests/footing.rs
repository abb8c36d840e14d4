//! Issue 28's rules, per trace: ours against the simple rules at an equal
//! warm under-share (our risk curve interpolated at each baseline's share),
//! the default 1 % risk kept, and cold only on each group's first job; on
//! the four real traces and on synthetic traces of one shape of group.

use std::path::Path;

use hpc_core::advice::Backtest;
use hpc_model::backtest::{equal_footing, Footing};
use hpc_testkit::Tool;

mod common;
use common::{find, real_trace_args, records, synth, synth_args};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));

/// The risks of the curve (as `bench/model.sh` and the equal-footing
/// comparison replay them).
const CURVE: &str = "1,2,3,5,10,15,20";

fn replay(args: &[&str]) -> Vec<Backtest> {
    let mut all = vec!["backtest", "--risks", CURVE, "--format", "ndjson"];
    all.extend_from_slice(args);
    let (code, out, err) = TOOL.cli(&all, "");
    assert_eq!(code, 0, "{err}");
    records(&out)
}

/// The four real traces (tests/data/traces), replayed as the benches
/// replay them.
fn real() -> Vec<(&'static str, Vec<Backtest>)> {
    ["MGnify", "SAP", "bwa", "montage"]
        .into_iter()
        .map(|name| {
            let args = real_trace_args(&name.to_lowercase());
            (
                name,
                replay(&args.iter().map(String::as_str).collect::<Vec<_>>()),
            )
        })
        .collect()
}

/// The 1 % rule: a warm under-share of at most 2 %, and a MAQ at least
/// p95 x 1.2's wherever p95 x 1.2 itself runs out on at most 2 % of jobs.
fn assert_one_percent(name: &str, recs: &[Backtest]) {
    let (ours, p95) = (find(recs, "ours", Some(0.01)), find(recs, "p95x1.2", None));
    assert!(ours.warm_under_share <= 0.02, "{name}: {ours:?}");
    if p95.warm_under_share <= 0.02 {
        assert!(ours.maq >= p95.maq, "{name}: {ours:?} vs {p95:?}");
    }
}

fn short(f: &[Footing]) -> Vec<&Footing> {
    f.iter().filter(|f| !f.holds()).collect()
}

#[test]
fn on_the_real_traces_ours_meets_every_baseline_at_its_under_share() {
    for (name, recs) in real() {
        let footing = equal_footing(&recs);
        assert_eq!(footing.len(), 3, "{name}: median, p95x1.2, max");
        assert!(short(&footing).is_empty(), "{name}: {footing:?}");
    }
}

#[test]
fn with_their_input_sizes_the_workflow_traces_hold_too() {
    // The WfCommons traces give each task's input size, and the model
    // predictor takes part. cat_bwa's memory ignores a 1000x larger input:
    // it must not be grown with it (the prior slope of 1 would).
    for name in ["bwa", "montage"] {
        let mut args = real_trace_args(name);
        args.extend(["--input".to_string(), "input_mb".to_string()]);
        let recs = replay(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let footing = equal_footing(&recs);
        assert!(short(&footing).is_empty(), "{name}: {footing:?}");
        assert_one_percent(name, &recs);
    }
}

#[test]
fn on_the_real_traces_the_default_risk_is_kept_and_cold_starts_are_the_baselines() {
    for (name, recs) in real() {
        assert_one_percent(name, &recs);
        // Cold on each group's first job only, as the baselines are.
        let (ours, max) = (find(&recs, "ours", Some(0.01)), find(&recs, "max", None));
        assert_eq!(ours.cold, max.cold, "{name}: {ours:?} vs {max:?}");
    }
}

#[test]
fn tight_groups_are_sized_as_tightly_as_max_so_far() {
    // Issue 28: on montage ours had MAQ 0.278 against max so far's 0.671
    // (ten cold jobs at 4 GiB a group, the pooled spread, a 128 MiB floor).
    let recs = &real()[3].1;
    let (ours, max) = (find(recs, "ours", Some(0.01)), find(recs, "max", None));
    assert!(ours.maq > 0.7 && ours.maq > max.maq, "{ours:?} vs {max:?}");
}

fn shaped(dir: &Path, shape: &str, seed: u64) -> Vec<Backtest> {
    let path = dir.join(format!("{shape}-{seed}.csv"));
    std::fs::write(&path, synth::shaped(seed, 3000, shape)).unwrap();
    let args = synth_args(&path.to_string_lossy());
    replay(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn ceiling_and_tight_groups_beat_p95_and_the_median_and_keep_the_risk() {
    let dir = tempfile::tempdir().unwrap();
    for shape in ["ceiling", "tight"] {
        // Seeds 1-3 are the ones the sizer was tuned on; 4-8 were not.
        for seed in 1..=8 {
            let recs = shaped(dir.path(), shape, seed);
            let name = format!("{shape} {seed}");
            assert_one_percent(&name, &recs);
            for f in equal_footing(&recs) {
                if f.baseline != "max" {
                    assert!(f.holds(), "{name}: {f:?}");
                } else if shape == "tight" {
                    // At least max so far at its share on every seed. Seed
                    // 1 was 0.017 to 0.023 short while a miss's cost could
                    // not make the costliest tight group safer than the
                    // adapted level, which the cheap groups that never run
                    // out had raised to 4.6 % at 1 %; 0.003 short while a
                    // group's first 20 jobs counted no miss cost.
                    assert!(f.holds(), "{name}: {f:?}");
                } else {
                    // Within 0.005 of max so far at its share (seeds 2-8
                    // above it). Before: 0.015 to 0.047 short on seeds 1,
                    // 3, 5, 7 and 8 while a ceiling was missed whenever its
                    // largest reading came from the largest input, the
                    // group's own tail (the top of its latest values) read
                    // just below the ceiling, and the ceiling's margin was
                    // a fixed 2 %; 0.004 to 0.041 short before a miss's cost
                    // limited the risk the costliest jobs take, 0.032 to
                    // 0.058 before a ceiling capped every predictor, and
                    // 0.12 on seed 1 while the model grew memory beyond a
                    // ceiling with the input.
                    assert!(f.ours >= f.maq - 0.01, "{name}: {f:?}");
                }
            }
        }
    }
}

/// On seeds 1-3 of `shape`, ours is at most `p95` MAQ below p95 x 1.2 at
/// its under-share and at most `other` below the other baselines at theirs.
fn assert_close(shape: &str, p95: f64, other: f64) {
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=3 {
        for f in equal_footing(&shaped(dir.path(), shape, seed)) {
            let slack = if f.baseline == "p95x1.2" { p95 } else { other };
            assert!(f.ours >= f.maq - slack, "{shape} {seed}: {f:?}");
        }
    }
}

#[test]
fn drifting_groups_come_close_to_p95_at_its_share() {
    // Groups whose memory grows by e over the trace. p95 x 1.2 of all the
    // history runs out on 5-6 % of jobs; ours at that share was 0.007 to
    // 0.018 below it while the costliest jobs took the most risk as if a
    // miss cost nothing; 0.003 to 0.010 while a group's first 20 jobs
    // counted no miss cost; 0.004 below to 0.001 above now (seeds 4-8 of
    // bench/model.sh: 0.001 below to 0.018 above).
    assert_close("drift", 0.005, 0.0);
}

#[test]
fn one_loose_group_alone_comes_close_to_p95_at_its_share() {
    // One tool's history, log-normal (log-sd 0.7): p95 x 1.2 of all its
    // values is about the best a rule can do. Ours was 0.031-0.035 MAQ
    // below it at its share while the level moved by 0.5 r a miss and the
    // choice of predictor followed the latest 30 jobs; 0.003-0.011 while
    // the group's own tail read the largest of its latest 1 / a - 1 values
    // alone, whose wander cost more than p95 x 1.2's steady value; 0 to
    // 0.007 now that it reads the rank among up to 1000 (seeds 4-8 of
    // bench/model.sh: 0.007 below to 0.003 above).
    assert_close("single", 0.008, 0.005);
}

/// Each real trace's three costliest groups (memory x runtime summed;
/// SAP's builds weigh 1), each written alone to `dir`, with the arguments
/// that replay it (as `bench/one_tool.py` replays them).
fn costliest_alone(dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (name, group, used, runtime) in [
        (
            "mgnify",
            "lineage",
            "peak_mem_in_gbs",
            Some("wall_clock_seconds"),
        ),
        ("sap", "group", "peak_mb", None),
        ("bwa", "process", "used_mb", Some("runtime_s")),
        ("montage", "process", "used_mb", Some("runtime_s")),
    ] {
        let mut args = real_trace_args(name);
        let mut rd = csv::Reader::from_path(&args[1]).unwrap();
        let head = rd.headers().unwrap().clone();
        let col = |c: &str| head.iter().position(|h| h == c).unwrap();
        let (g, u, t) = (col(group), col(used), runtime.map(col));
        let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        let num = |r: &csv::StringRecord, i: usize| r[i].parse::<f64>().unwrap_or(0.0);
        let mut cost: Vec<(String, f64)> = Vec::new();
        for r in &rows {
            let c = num(r, u) * t.map_or(1.0, |t| num(r, t));
            match cost.iter_mut().find(|(k, _)| k == &r[g]) {
                Some((_, sum)) => *sum += c,
                None => cost.push((r[g].to_string(), c)),
            }
        }
        cost.sort_by(|a, b| b.1.total_cmp(&a.1));
        if runtime.is_some() && name != "mgnify" {
            args.extend(["--input".to_string(), "input_mb".to_string()]);
        }
        for (key, _) in cost.into_iter().take(3) {
            let path = dir.join(format!("{name}-{}.csv", out.len()));
            let mut w = csv::Writer::from_path(&path).unwrap();
            w.write_record(&head).unwrap();
            for r in rows.iter().filter(|r| r[g] == key) {
                w.write_record(r).unwrap();
            }
            w.flush().unwrap();
            let mut alone = args.clone();
            alone[1] = path.to_string_lossy().into_owned();
            out.push((format!("{name} {key}"), alone));
        }
    }
    out
}

#[test]
fn one_tools_history_each_real_traces_costliest_groups_alone() {
    // Issue 28's "one tool's history", counted as bench/one_tool.py counts
    // it. Not all of it holds yet. The 1 % rule fails on MGnify's Marine
    // lineage (ours 0.461 at 0.80 % out, p95 x 1.2 0.487 at 1.74 %; ours at
    // 2 %: 0.504 at 1.60 %), on SAP's largest j500 build (its first hundred of 153 builds
    // sized 1.1-1.3x their largest value: the log-normal inflation of a short
    // history, where the values have a light upper tail), and on bwa_index
    // and montage's mViewer (1 of 14 and of 31 out, as max so far: bwa_index's
    // 11th job has a 10x larger input and uses 10x the memory). The equal
    // footing fails on 6 of 36, by 0.001 to 0.047: those SAP builds, mViewer,
    // MGnify's Fecal lineage, whose curve is uneven as a few of its largest
    // jobs run out or not, and bwa_index (0.670 against max so far's 0.671:
    // both size its first runs at 160 MiB, and the 10x job's retries double
    // from there).
    let dir = tempfile::tempdir().unwrap();
    let (mut rule, mut even, mut evens) = (0, 0, 0);
    let groups = costliest_alone(dir.path());
    assert_eq!(groups.len(), 12);
    for (name, args) in &groups {
        let recs = replay(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let (ours, p95, max) = (
            find(&recs, "ours", Some(0.01)),
            find(&recs, "p95x1.2", None),
            find(&recs, "max", None),
        );
        // Never more often out of memory than 2 %, or than max so far
        // where a history is too short for one miss to be 2 %.
        assert!(
            ours.warm_under_share <= 0.02f64.max(max.warm_under_share),
            "{name}: {ours:?} vs {max:?}"
        );
        rule += usize::from(
            ours.warm_under_share <= 0.02 && (p95.warm_under_share > 0.02 || ours.maq >= p95.maq),
        );
        for f in equal_footing(&recs) {
            evens += 1;
            even += usize::from(f.holds());
            assert!(f.ours >= f.maq - 0.05, "{name}: {f:?}");
        }
    }
    // As bench/one_tool.py counts them: 8 of 12 and 30 of 36 now. (MGnify's
    // Oceanic lineage ran out on 3 of 129 while its request capped the
    // advice with a job 1 % below it; see calib's request cap.)
    assert!(rule >= 8, "the 1 % rule holds on {rule} of 12");
    assert!(even >= 30, "equal footing holds on {even} of {evens}");
}
