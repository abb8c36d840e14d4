//! hpc-ingest reads its inputs through the shared loop: files and stdin in
//! the order given (issue 9), stdin at most once.

use hpc_testkit::{records, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-ingest"));

#[test]
fn files_and_stdin_are_read_in_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    let sacct = |id: u32| format!("JobID|State|Elapsed\n{id}|COMPLETED|00:00:10\n");
    let write = |name: &str, id: u32| {
        let p = dir.path().join(name);
        std::fs::write(&p, sacct(id)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (a, b) = (write("a", 1), write("b", 3));
    let stdin = sacct(2);
    let (code, out, err) = TOOL.cli(&["--ndjson", "--utc", &a, "-", &b], &stdin);
    assert_eq!(code, 0, "{err}");
    let ids: Vec<String> = records(&out)
        .iter()
        .map(|v| v["job_id"].to_string())
        .collect();
    assert_eq!(ids, ["\"1\"", "\"2\"", "\"3\""]);
    let (code, _, err) = TOOL.cli(&["--ndjson", "--utc", "-", &a, "-"], &stdin);
    assert_eq!(code, 2);
    assert!(err.contains("stdin (-) given twice"));
}
