//! hpc-model backtest: the MGnify acceptance figures (issue 10), the model
//! tier on a trace where memory grows with input size, CSV mapping errors.

use std::path::Path;

use hpc_core::advice::Backtest;
use hpc_testkit::Tool;

mod common;
use common::{find, records, trace};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));
/// The MGnify replay, grouped by lineage, scored on jobs whose group has at
/// least 5 earlier jobs.
fn mgnify() -> Vec<Backtest> {
    let csv = trace("mgnify_metaspades_3.15.3_jobs.csv");
    let tsv = trace("mgnify_memory_heuristics.tsv");
    let (code, out, err) = TOOL.cli(
        &[
            "backtest",
            "--csv",
            &csv,
            "--mgnify",
            &tsv,
            "--min-earlier",
            "5",
            "--format",
            "ndjson",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    records(&out)
}

#[test]
fn mgnify_under_share_is_calibrated_at_every_risk() {
    let recs = mgnify();
    let ours = find(&recs, "ours", Some(0.01));
    assert!(ours.jobs > 8000, "{ours:?}");
    assert!(ours.under_share <= 0.02, "1 %: {ours:?}");
    for r in [0.02, 0.03, 0.05, 0.1] {
        let b = find(&recs, "ours", Some(r));
        let seen = b.warm_under_share;
        assert!(seen >= 0.5 * r && seen <= 1.5 * r, "risk {r}: {b:?}");
    }
    // The baselines are the README's: the request under-predicts about
    // 7.7 %, p95 x 1.2 about 3.9 % (here 3.45 % among warm groups).
    let p95 = find(&recs, "p95x1.2", None);
    assert!(p95.under_share > 0.03 && p95.under_share < 0.04, "{p95:?}");
    assert!(find(&recs, "request", None).under_share > 0.06);
}

#[test]
fn mgnify_ours_at_5_percent_wastes_less_than_p95x12() {
    let recs = mgnify();
    let p95 = find(&recs, "p95x1.2", None);
    let ours = find(&recs, "ours", Some(0.05));
    assert!(
        ours.memtime_ratio.unwrap() < p95.memtime_ratio.unwrap(),
        "{ours:?} vs {p95:?}"
    );
    assert!(ours.wastage_gbh < p95.wastage_gbh, "{ours:?} vs {p95:?}");
}

/// At the default 1 % risk each job is sized where one more unit of risk
/// saves the same memory-time: long, large assemblies take more of the risk
/// and short ones less. MAQ at 1 % was 0.421 when the level followed the
/// cost to the power 0.5, then 0.444 at a 0.98 % under-share (p95 x 1.2:
/// 0.488 at 3.83 %); with each group sized from its second job and its own
/// tail beside the log-normal bound (issue 28), 0.443 at 1.25 % over all
/// jobs, and 0.441 at 1.07 % over these (at least 5 earlier jobs). With
/// the level's step 0.2 r (was 0.5 r), 0.412 at 0.82 %: the level climbs
/// more slowly from the stated 1 % to the 1.6 % this trace needs, and
/// falls less after a miss in a run of misses; over the whole curve ours
/// is higher at every baseline's share (tests/footing.rs). With the step
/// 0.1 on the log scale (a share of the level, not of the risk), 0.422 at
/// 0.79 %.
#[test]
fn mgnify_at_1_percent_spends_the_risk_where_it_saves_most() {
    let recs = mgnify();
    let ours = find(&recs, "ours", Some(0.01));
    assert!(ours.maq >= 0.42, "{ours:?}");
    assert!(ours.warm_under_share <= 0.011, "{ours:?}");
}

/// Issue 10's criterion as written: some risk of ours with an under-share
/// at most p95 x 1.2's that also asks less memory-time and wastes less. At
/// 3 % ours under-predicts 3.11 % of jobs, asks 1.458x the requested
/// memory-time and wastes 82.0M GB-h, against 3.45 %, 1.508x and 82.8M.
#[test]
fn mgnify_ours_dominates_p95x12_at_equal_or_lower_under_share() {
    let recs = mgnify();
    let p95 = find(&recs, "p95x1.2", None);
    let wins = recs.iter().filter(|b| b.policy == "ours").any(|b| {
        b.under_share <= p95.under_share
            && b.memtime_ratio.unwrap() < p95.memtime_ratio.unwrap()
            && b.wastage_gbh < p95.wastage_gbh
    });
    assert!(wins, "{recs:#?}");
}

/// A trace of 4 groups where peak = 500 MiB + 3 x input (+- 5 %) and the
/// inputs range over 100..10000 MiB.
fn growing_trace(dir: &Path) -> String {
    let mut s = String::from("id,tool,input_mb,peak_mb,req_mb,runtime_s\n");
    let mut rng = hpc_testkit::rng::Lcg::new(11);
    let mut u = || rng.uniform();
    for i in 0..1200 {
        let input = 100.0 + 9900.0 * u();
        let peak = (500.0 + 3.0 * input) * (0.95 + 0.1 * u());
        s.push_str(&format!(
            "J{i},t{},{input:.1},{peak:.1},40000,{}\n",
            i % 4,
            600 + i % 7 * 60
        ));
    }
    let path = dir.join("growing.csv");
    std::fs::write(&path, s).unwrap();
    path.to_string_lossy().into_owned()
}

fn growing(csv: &str, input: bool) -> Vec<Backtest> {
    let mut args = vec![
        "backtest",
        "--csv",
        csv,
        "--group",
        "tool",
        "--used",
        "peak_mb",
        "--request",
        "req_mb",
        "--runtime",
        "runtime_s",
        "--order",
        "id",
        "--format",
        "ndjson",
    ];
    if input {
        args.extend(["--input", "input_mb"]);
    }
    let (code, out, err) = TOOL.cli(&args, "");
    assert_eq!(code, 0, "{err}");
    records(&out)
}

#[test]
fn the_model_predictor_wastes_less_than_history_alone_when_memory_grows_with_input() {
    let dir = tempfile::tempdir().unwrap();
    let csv = growing_trace(dir.path());
    let (with, without) = (growing(&csv, true), growing(&csv, false));
    for r in [0.01, 0.05] {
        let (m, h) = (
            find(&with, "ours", Some(r)),
            find(&without, "ours", Some(r)),
        );
        assert!(
            m.wastage_gbh < 0.7 * h.wastage_gbh,
            "risk {r}: {m:?} vs {h:?}"
        );
        assert!(m.warm_under_share <= 1.5 * r + 0.005, "{m:?}");
    }
}

#[test]
fn text_output_has_the_table_and_the_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let csv = growing_trace(dir.path());
    let (code, out, err) = TOOL.cli(
        &[
            "backtest",
            "--csv",
            &csv,
            "--group",
            "tool",
            "--used",
            "peak_mb",
            "--runtime",
            "runtime_s",
            "--order",
            "id",
            "--risks",
            "1,5",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("policy"), "{out}");
    assert!(
        out.contains("calibration: stated risk vs observed"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ours")).count(),
        4,
        "{out}"
    );
}

#[test]
fn a_bad_cell_is_rejected_with_its_line_and_a_missing_column_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    std::fs::write(&path, "id,g,used,t\n1,a,5,10\n2,a,five,10\n3,a,6,10\n").unwrap();
    let p = path.to_str().unwrap();
    let base = [
        "backtest",
        "--csv",
        p,
        "--group",
        "g",
        "--used",
        "used",
        "--runtime",
        "t",
    ];
    let (code, out, err) = TOOL.cli(&[&base[..], &["--order", "id"]].concat(), "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 3: used 'five' is not a finite number"),
        "{err}"
    );
    assert!(
        out.contains("ours"),
        "the good rows are still replayed: {out}"
    );
    // NaN, inf and 1e308 were read as numbers and replayed or skipped
    // quietly (1e308 made every figure NaN), exit 0; a Latin-1 byte
    // aborted the whole replay; an unclosed quote swallowed the rest of
    // the file. Each is now rejected with its line and the others kept.
    let mut bad =
        b"id,g,used,t\n1,a,5,10\n2,a,NaN,10\n3,a,inf,10\n4,a,1e308,10\n5,a,6,1e400\n6,caf".to_vec();
    bad.extend(b"\xe9,6,10\n7,a,7,10\n8,\"a,120,10\n9,a,7,10\n");
    std::fs::write(&path, bad).unwrap();
    let (code, out, err) = TOOL.cli(
        &[&base[..], &["--order", "id", "--format", "ndjson"]].concat(),
        "",
    );
    assert_eq!(code, 1, "{err}");
    for line in [
        "line 3: used 'NaN'",
        "line 4: used 'inf'",
        "line 5: used '1e308'",
        "line 6: runtime '1e400'",
        "line 7: not UTF-8",
        "line 9: a field runs over several lines",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
    let ours = out.lines().find(|l| l.contains("\"ours\"")).unwrap();
    assert!(ours.contains("\"jobs\":2"), "jobs 1 and 7: {ours}");
    // An unclosed quote in the last column kept the field count and
    // swallowed the rest of the file.
    // A row short of a field is rejected too.
    std::fs::write(
        &path,
        "id,g,t,used\n1,a,10,5\n2,a,10\n3,a,10,\"6\n4,a,10,7\n",
    )
    .unwrap();
    let (code, _, err) = TOOL.cli(&[&base[..], &["--order", "id"]].concat(), "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 3: 3 fields where the header has 4"),
        "{err}"
    );
    assert!(
        err.contains("line 4: a field runs over several lines"),
        "{err}"
    );
    // A CRLF file's lines were named one short.
    std::fs::write(
        &path,
        "id,g,used,t\r\n1,a,5,10\r\n2,a,five,10\r\n3,a,6,10\r\n",
    )
    .unwrap();
    let (code, out, err) = TOOL.cli(
        &[&base[..], &["--order", "id", "--format", "ndjson"]].concat(),
        "",
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 3: used 'five'"), "{err}");
    assert!(out.contains("\"jobs\":2"), "{out}");
    let (code, _, err) = TOOL.cli(&[&base[..], &["--order", "nope"]].concat(), "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no column nope"), "{err}");
    let (code, _, _) = TOOL.cli(
        &[&base[..], &["--order", "id", "--risks", "0"]].concat(),
        "",
    );
    assert_eq!(code, 2);
    for cold in ["nan", "inf", "-1", "0"] {
        let (code, _, err) = TOOL.cli(
            &[&base[..], &["--order", "id", "--cold", cold]].concat(),
            "",
        );
        assert_eq!(code, 2, "--cold {cold}: {err}");
        assert!(err.contains("--cold"), "{err}");
    }
}

#[test]
fn a_trace_with_no_job_to_replay_is_an_error_not_an_empty_table() {
    // A filter that matched nothing left only the header: the table of
    // zeros and NaN it printed (exit 0) read as a result.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    std::fs::write(&path, "id,g,used\n").unwrap();
    let p = path.to_str().unwrap();
    let args = [
        "backtest", "--csv", p, "--group", "g", "--used", "used", "--order", "id",
    ];
    let (code, out, err) = TOOL.cli(&args, "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no job to replay: none of the 0 rows"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    // Rows that never completed with a value say so too.
    std::fs::write(&path, "id,g,used\n1,a,0\n2,a,0\n").unwrap();
    let (code, _, err) = TOOL.cli(&args, "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("none of the 2 rows"), "{err}");
    // A trace given as job records (no --csv): "3 of 0 input lines
    // rejected", and no word of what was meant.
    let (code, _, err) = TOOL.cli(&["backtest", p], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("3 of 3 input lines rejected"), "{err}");
    assert!(err.contains("needs --csv or --nextflow"), "{err}");
}
