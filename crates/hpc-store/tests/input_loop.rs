//! `hpc-store put` reads its inputs through the shared loop: files and
//! stdin in the order given, bad lines named with their file and line
//! across batches, stdin at most once.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `hpc-store --db DB ARGS` with the file `stdin` on its stdin.
fn store(db: &Path, args: &[&str], stdin: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpc-store"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::from(std::fs::File::open(stdin).unwrap()))
        .output()
        .unwrap()
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
    let stdin = write("stdin", "\nnot json either\n");
    let out = store(&db, &["put", &a, "-", &b], stdin.as_ref());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
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
    let out = store(&db2, &["put", "-", &a, "-"], stdin.as_ref());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stdin (-) given twice"));
    assert!(!db2.exists(), "a usage error opens no database");
}
