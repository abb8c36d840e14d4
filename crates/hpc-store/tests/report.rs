//! `hpc-store report`, `flags` and `history` on a database built from the
//! fixture job records, checked against sums computed here from the records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use hpc_testkit::Tool;
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-store"));

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hpc-store/jobs.ndjson")
}

/// Runs `hpc-store --db DB ARGS` with no group file of the user's; it must
/// succeed.
fn run(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    TOOL.run_db_ok(db, args, stdin)
}

fn db_with_fixture(dir: &Path) -> PathBuf {
    let db = dir.join("h.db");
    run(&db, &["put"], &std::fs::read(fixture()).unwrap());
    db
}

fn jobs() -> Vec<Value> {
    std::fs::read_to_string(fixture())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "job")
        .collect()
}

#[derive(Default, Debug)]
struct Sums {
    jobs: f64,
    cpu_h: f64,
    cpu_known: f64,
    cpu_used: f64,
    cpu_waste: f64,
    mem: f64,
    mem_known: f64,
    mem_waste: f64,
    gpu: f64,
}

fn f(j: &Value, k: &str) -> Option<f64> {
    j.get(k).and_then(Value::as_f64)
}

/// The report's sums, computed record by record.
fn by_hand(key: &str) -> BTreeMap<String, Sums> {
    let mut m: BTreeMap<String, Sums> = BTreeMap::new();
    for j in jobs() {
        let k = j
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("(none)")
            .to_string();
        let s = m.entry(k).or_default();
        s.jobs += 1.0;
        s.cpu_h += f(&j, "cpu_hours_reserved").unwrap_or(0.0);
        if let (Some(r), Some(c)) = (f(&j, "cpu_hours_reserved"), f(&j, "total_cpu_s")) {
            s.cpu_known += r;
            s.cpu_used += c / 3600.0;
        }
        s.cpu_waste += f(&j, "cpu_hours_wasted").unwrap_or(0.0);
        s.mem += f(&j, "mem_gb_hours_reserved").unwrap_or(0.0);
        if let (Some(r), Some(w)) = (f(&j, "mem_gb_hours_reserved"), f(&j, "mem_gb_hours_wasted")) {
            s.mem_known += r;
            s.mem_waste += w;
        }
        s.gpu += f(&j, "gpu_hours_reserved").unwrap_or(0.0);
    }
    m
}

fn close(a: Option<f64>, b: f64, what: &str) {
    let a = a.unwrap_or_else(|| panic!("{what} absent, expected {b}"));
    assert!(
        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
        "{what}: {a} vs {b}"
    );
}

fn check(by: &str, key: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let out = run(&db, &["report", "--by", by, "--format", "ndjson"], b"");
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected = by_hand(key);
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for r in rows {
        let k = r[by].as_str().unwrap();
        let e = &expected[k];
        close(f(&r, "jobs"), e.jobs, &format!("{k} jobs"));
        close(f(&r, "cpu_h"), e.cpu_h, &format!("{k} cpu_h"));
        close(
            f(&r, "cpu_wasted_h"),
            e.cpu_waste,
            &format!("{k} cpu waste"),
        );
        close(f(&r, "mem_gbh"), e.mem, &format!("{k} mem"));
        close(
            f(&r, "mem_wasted_gbh"),
            e.mem_waste,
            &format!("{k} mem waste"),
        );
        close(f(&r, "gpu_h"), e.gpu, &format!("{k} gpu"));
        if e.cpu_known > 0.0 {
            close(
                f(&r, "cpu_eff"),
                100.0 * e.cpu_used / e.cpu_known,
                &format!("{k} cpu eff"),
            );
        } else {
            assert!(r["cpu_eff"].is_null(), "{k}: no CPU use known");
        }
        if e.mem_known > 0.0 {
            close(
                f(&r, "mem_eff"),
                100.0 * (e.mem_known - e.mem_waste) / e.mem_known,
                &format!("{k} mem eff"),
            );
        } else {
            assert!(r["mem_eff"].is_null(), "{k}: no peak known");
        }
    }
}

#[test]
fn report_by_user_equals_the_sums_of_the_job_records() {
    check("user", "user");
}

#[test]
fn report_by_partition_equals_the_sums_of_the_job_records() {
    check("partition", "partition");
}

#[test]
fn report_by_state_and_account_too() {
    check("state", "state");
    check("account", "account");
}

#[test]
fn groups_come_from_the_mapping_file_else_the_account() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let map = dir.path().join("groups");
    std::fs::write(&map, "# user group\nalice physics\nbob, physics\n").unwrap();
    let out = run(
        &db,
        &[
            "report",
            "--by",
            "group",
            "--groups",
            map.to_str().unwrap(),
            "--format",
            "csv",
        ],
        b"",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let hand = by_hand("user");
    let physics = hand["alice"].jobs + hand["bob"].jobs;
    let line = text
        .lines()
        .find(|l| l.starts_with("physics,"))
        .expect("physics row");
    assert_eq!(line.split(',').nth(1).unwrap(), format!("{physics}"));
    // Users without a mapping fall back to their account.
    let accounts = by_hand("account");
    assert!(
        accounts
            .keys()
            .any(|a| text.lines().any(|l| l.starts_with(&format!("{a},")))),
        "{text}"
    );
}

#[test]
fn filters_apply_to_reports() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let out = run(
        &db,
        &[
            "report", "--by", "user", "--format", "csv", "--user", "alice",
        ],
        b"",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with("alice,"));
    let out = run(
        &db,
        &[
            "report",
            "--by",
            "partition",
            "--format",
            "csv",
            "--since",
            "2026-03-01",
            "--until",
            "2026-03-03",
        ],
        b"",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let hand: f64 = jobs()
        .iter()
        .filter(|j| {
            let t = j["end"].as_str().or(j["submit"].as_str()).unwrap_or("");
            ("2026-03-01"..="2026-03-02T99").contains(&t)
        })
        .count() as f64;
    let total: f64 = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(total, hand, "{text}");
}

#[test]
fn terminal_table_is_aligned_within_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    for by in [
        "user",
        "partition",
        "node",
        "state",
        "tool",
        "account",
        "group",
    ] {
        let out = run(&db, &["report", "--by", by], b"");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() >= 2, "{by}: {text}");
        for l in &lines {
            assert!(l.chars().count() <= 80, "{by}: {l:?}");
        }
        let width = lines[0].len();
        assert!(
            lines.iter().all(|l| l.len() == width),
            "{by}: ragged\n{text}"
        );
    }
}

#[test]
fn tool_report_uses_analysis_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let out = run(&db, &["report", "--by", "tool", "--format", "csv"], b"");
    let text = String::from_utf8(out.stdout).unwrap();
    let bwa = text
        .lines()
        .find(|l| l.starts_with("bwa,"))
        .expect("bwa row");
    assert_eq!(bwa.split(',').nth(1), Some("2"));
    assert!(text.lines().any(|l| l.starts_with("gromacs,")));
    let out = run(
        &db,
        &["history", "--tool", "bwa", "--format", "ndjson"],
        b"",
    );
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["metric"], "peak_rss_mb");
}

#[test]
fn flags_are_counted_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let flags = "{\"kind\":\"flag\",\"job_id\":\"9001\",\"flag\":\"mem_overrequest\",\"category\":\"misuse\",\"value\":0.1,\"threshold\":0.25,\"reason\":\"x\"}\n\
                 {\"kind\":\"flag\",\"job_id\":\"9002\",\"flag\":\"mem_overrequest\",\"category\":\"misuse\",\"value\":0.2,\"threshold\":0.25,\"reason\":\"y\"}\n\
                 {\"kind\":\"flag\",\"job_id\":\"12\",\"flag\":\"oom_killed\",\"category\":\"misuse\",\"value\":1,\"threshold\":null,\"reason\":\"z\"}\n";
    run(&db, &["put"], flags.as_bytes());
    let out = run(&db, &["flags", "--format", "csv"], b"");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("mem_overrequest,misuse,2,"), "{text}");
    assert!(text.contains("oom_killed,misuse,1,"), "{text}");
    let out = run(
        &db,
        &[
            "flags",
            "--jobs",
            "--format",
            "ndjson",
            "--since",
            "2026-11-01",
        ],
        b"",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("\"job_id\":\"12\""));
}

#[test]
fn an_empty_value_is_reported_as_none() {
    // A job named "" was a row with a blank key in `--by tool`, where the
    // man page promises "(none)" for jobs without a value.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let job = r#"{"kind":"job","cluster":"c","job_id":"5","job_id_raw":"5","user":"u","job_name":"","state":"COMPLETED","start":"2026-01-01T00:00:00Z","end":"2026-01-01T01:00:00Z","alloc_cpus":1,"cpu_hours_reserved":1,"is_final":true}"#;
    run(&db, &["put"], format!("{job}\n").as_bytes());
    let out = run(&db, &["report", "--by", "tool", "--format", "csv"], b"");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("(none),1,")), "{text}");
}
