//! `sacct --duplicates`: every run of a requeued job is kept.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_hpc-ingest");

fn ingest(db: &std::path::Path, text: &str) {
    let mut child = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const HEADER: &str = "JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU\n";
const RUN_1: &str = "500|500|REQUEUED|2026-03-01T10:00:00|2026-03-01T10:00:05|2026-03-01T12:00:05|02:00:00|4|4G|04:00:00\n\
                     500.batch|500.batch|CANCELLED|2026-03-01T10:00:05|2026-03-01T10:00:05|2026-03-01T12:00:05|02:00:00|4||04:00:00\n";
const RUN_2: &str = "500|500|COMPLETED|2026-03-01T12:00:06|2026-03-01T12:05:00|2026-03-01T13:05:00|01:00:00|4|4G|03:00:00\n\
                     500.batch|500.batch|COMPLETED|2026-03-01T12:05:00|2026-03-01T12:05:00|2026-03-01T13:05:00|01:00:00|4||03:00:00\n";

fn runs(db: &std::path::Path) -> Vec<(String, f64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT state, cpu_hours_reserved FROM jobs WHERE job_id_raw = '500' ORDER BY start_ts",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn duplicates_keep_the_first_run_of_a_requeued_job() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    // While the first run is running, a harvest sees it.
    ingest(
        &db,
        &format!("{HEADER}500|500|RUNNING|2026-03-01T10:00:00|2026-03-01T10:00:05|Unknown|01:00:00|4|4G|02:00:00\n"),
    );
    // After the requeue, `sacct -D` shows both runs.
    ingest(&db, &format!("{HEADER}{RUN_1}{RUN_2}"));
    let want = vec![
        ("REQUEUED".to_string(), 8.0),
        ("COMPLETED".to_string(), 4.0),
    ];
    assert_eq!(runs(&db), want);
    // A later harvest without -D (only the last run) changes nothing.
    ingest(&db, &format!("{HEADER}{RUN_2}"));
    assert_eq!(runs(&db), want);
    // Without -D from the start, the last run replaces the running view.
    let db2 = dir.path().join("plain.db");
    ingest(
        &db2,
        &format!("{HEADER}500|500|RUNNING|2026-03-01T10:00:00|2026-03-01T10:00:05|Unknown|01:00:00|4|4G|02:00:00\n"),
    );
    ingest(&db2, &format!("{HEADER}{RUN_2}"));
    assert_eq!(runs(&db2), vec![("COMPLETED".to_string(), 4.0)]);
}
