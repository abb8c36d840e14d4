//! `hpc-store put` reads its inputs through the shared loop: files and
//! stdin in the order given, bad lines named with their file and line
//! across batches, stdin at most once.

use std::path::Path;

use hpc_testkit::{feed, text, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-store"));

/// Runs `hpc-store --db DB ARGS` with `stdin`; returns (exit code, stderr).
fn store(db: &Path, args: &[&str], stdin: &str) -> (Option<i32>, String) {
    let out = feed(TOOL.command(&["--db"]).arg(db).args(args), stdin.as_bytes());
    (out.status.code(), text(&out.stderr))
}

fn flag(job: u32) -> String {
    format!(
        "{{\"kind\":\"flag\",\"job_id\":\"{job}\",\"flag\":\"f\",\"category\":\"c\",\"value\":1,\"threshold\":1,\"reason\":\"r\"}}\n"
    )
}

#[test]
fn put_names_bad_lines_by_input_and_line_across_batches() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    // More lines than one batch (20 000), a bad one after the first batch.
    let mut big: String = (0..20_005).map(flag).collect();
    big.push_str("not json\n");
    let a = write("a.ndjson", &big);
    let b = write("b.ndjson", &(flag(1) + "{\"job_id\":\"2\"}\n"));
    let stdin = "\nnot json either\n";
    let (code, err) = store(&db, &["put", &a, "-", &b], stdin);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("{a}: line 20006: not a JSON object")),
        "{err}"
    );
    assert!(
        err.contains("hpc-store: line 2: not a JSON object"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{b}: line 2: not a JSON object")),
        "{err}"
    );
    assert!(err.contains("from 20010 lines"), "{err}");
    assert!(err.contains("; 3 rejected"), "{err}");

    let db2 = dir.path().join("h2.db");
    let (code, err) = store(&db2, &["put", "-", &a, "-"], stdin);
    assert_eq!(code, Some(2));
    assert!(err.contains("stdin (-) given twice"));
    assert!(!db2.exists(), "a usage error opens no database");
}
