//! hpc-merge reads its inputs through the shared loop: files and stdin in
//! the order given (issue 9), bad lines named with their file and line, a
//! cut last record only warned about.

use hpc_testkit::{records, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-merge"));

#[test]
fn files_and_stdin_are_read_in_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let node = |host: &str, note: u32, tail: &str| {
        format!(
            "{{\"kind\":\"meta\",\"job_id\":\"5\",\"host\":\"{host}\",\"start\":100.0,\"interval_s\":1.0,\"probe_version\":\"t\"}}\n\
             {{\"kind\":\"sample\",\"t\":101.0,\"rss_mb\":10}}\n\
             {{\"kind\":\"note\",\"job_id\":\"5\",\"n\":{note}}}\n{tail}"
        )
    };
    let a = write("a.ndjson", &node("n1", 1, "not json\n"));
    let b = write("b.ndjson", &node("n3", 3, "{\"kind\":\"sample\",\"t\":10"));
    let (code, stdout, err) = TOOL.cli(&[&a, "-", &b], &node("n2", 2, ""));
    assert_eq!(code, 1, "{err}");
    let notes: Vec<u64> = records(&stdout)
        .into_iter()
        .filter(|v| v["kind"] == "note")
        .map(|v| v["n"].as_u64().unwrap())
        .collect();
    assert_eq!(notes, [1, 2, 3], "{stdout}");
    assert!(err.contains(&format!("{a}: line 4: not a record")), "{err}");
    assert!(
        err.contains(&format!("{b}: line 4: truncated last line ignored")),
        "{err}"
    );
    assert!(err.contains("1 of 11 input lines rejected"), "{err}");
}
