//! hpc-ingest reads its inputs through the shared loop: files and stdin in
//! the order given (issue 9), stdin at most once.

use std::process::{Command, Stdio};

#[test]
fn files_and_stdin_are_read_in_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, id: u32| {
        let p = dir.path().join(name);
        let text = format!("JobID|State|Elapsed\n{id}|COMPLETED|00:00:10\n");
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (a, stdin, b) = (write("a", 1), write("stdin", 2), write("b", 3));
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hpc-ingest"))
            .args(["--ndjson", "--utc"])
            .args(args)
            .stdin(Stdio::from(std::fs::File::open(&stdin).unwrap()))
            .output()
            .unwrap()
    };
    let out = run(&[&a, "-", &b]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["job_id"].to_string())
        .collect();
    assert_eq!(ids, ["\"1\"", "\"2\"", "\"3\""]);
    let out = run(&["-", &a, "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stdin (-) given twice"));
}
