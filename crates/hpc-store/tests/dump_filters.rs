//! `dump --tool`, `--limit` and `--kind analysis|rec`: the history that
//! hpc-model recommend reads, taken from a real SQLite file.

use std::path::Path;
use std::process::Output;

use hpc_testkit::{feed, records, text, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-store"));

fn store(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    feed(TOOL.command(&[]).arg("--db").arg(db).args(args), stdin)
}

/// Ten jobs of ana ending a day apart: the even ones ran STAR (their
/// analysis record says so), the odd ones are named `bwa` and have none;
/// one job of bob ran STAR too. One `rec` record rides along.
fn history() -> String {
    let mut s = String::new();
    for i in 1..=10 {
        let name = if i % 2 == 0 { "align" } else { "bwa" };
        s += &format!(
            r#"{{"kind":"job","cluster":"c","job_id":"{i}","job_id_raw":"{i}","user":"ana","job_name":"{name}","state":"COMPLETED","submit":"2026-01-{i:02}T00:00:00Z","start":"2026-01-{i:02}T00:00:00Z","end":"2026-01-{i:02}T01:00:00Z","is_final":true}}"#
        );
        s.push('\n');
        if i % 2 == 0 {
            s += &format!(
                r#"{{"kind":"analysis","job_id":"{i}","script":"a.sbatch","script_sha256":"00","request":{{}},"tool":"star"}}"#
            );
            s.push('\n');
        }
    }
    s += r#"{"kind":"job","cluster":"c","job_id":"99","job_id_raw":"99","user":"bob","state":"COMPLETED","submit":"2026-01-20T00:00:00Z","start":"2026-01-20T00:00:00Z","end":"2026-01-20T01:00:00Z","is_final":true}"#;
    s.push('\n');
    s += r#"{"kind":"analysis","job_id":"99","script":"b.sbatch","script_sha256":"00","request":{},"tool":"star"}"#;
    s.push('\n');
    s += r#"{"kind":"rec","job_id":"10","tool":"star","risk":0.01,"mem_mb":4096}"#;
    s.push('\n');
    s
}

fn ids(out: &Output, kind: &str) -> Vec<String> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    records(&text(&out.stdout))
        .iter()
        .filter(|r| r["kind"] == kind)
        .map(|r| r["job_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn tool_and_limit_select_the_latest_jobs_of_one_tool() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = store(&db, &["put"], history().as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));

    let q = ["--user", "ana", "--tool", "star"];
    let all = store(&db, &[&["dump", "--kind", "job"][..], &q].concat(), b"");
    assert_eq!(ids(&all, "job"), ["2", "4", "6", "8", "10"]);

    let last = [
        &["dump", "--kind", "job,analysis"][..],
        &q,
        &["--limit", "3"],
    ]
    .concat();
    let out = store(&db, &last, b"");
    assert_eq!(
        ids(&out, "job"),
        ["6", "8", "10"],
        "the latest 3, oldest first"
    );
    // A limit beyond SQLite's integers is no limit ("datatype mismatch").
    let huge = store(
        &db,
        &[&["dump"][..], &q, &["--limit", "18446744073709551615"]].concat(),
        b"",
    );
    assert_eq!(ids(&huge, "job").len(), 5);
    assert_eq!(
        ids(&out, "analysis"),
        ["10", "6", "8"],
        "their analyses (by job id)"
    );

    // A job without an analysis record is its job name's tool.
    let bwa = store(&db, &["dump", "--user", "ana", "--tool", "bwa"], b"");
    assert_eq!(ids(&bwa, "job"), ["1", "3", "5", "7", "9"]);

    // --kind rec writes the rec records alone; other writes every kept one.
    let rec = store(&db, &["dump", "--kind", "rec"], b"");
    assert_eq!(ids(&rec, "rec"), ["10"]);
    assert_eq!(records(&text(&rec.stdout)).len(), 1);
    let other = store(&db, &["dump", "--kind", "other"], b"");
    assert_eq!(records(&text(&other.stdout)).len(), 7);
    // Each record once however the kinds overlap: analysis,other wrote
    // every analysis twice (12 lines for 7 records).
    for kinds in ["analysis,other", "other,rec,analysis", "rec,rec"] {
        let out = store(&db, &["dump", "--kind", kinds], b"");
        let want = if kinds == "rec,rec" { 1 } else { 7 };
        assert_eq!(records(&text(&out.stdout)).len(), want, "{kinds}");
    }
}

#[test]
fn an_unknown_kind_is_still_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    assert!(store(&db, &["put"], history().as_bytes()).status.success());
    let out = store(&db, &["dump", "--kind", "analysis,bogus"], b"");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
