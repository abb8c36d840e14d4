//! hpc-flags reads its inputs through the shared loop: files and stdin in
//! the order given (issue 9), stdin at most once.

use hpc_testkit::{records, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-flags"));

#[test]
fn files_and_stdin_are_read_in_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    let note = |n: u32| format!("{{\"kind\":\"note\",\"job_id\":\"9\",\"n\":{n}}}\n");
    let path = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let a = path("a.ndjson", note(1));
    let b = path("b.ndjson", note(3) + "not json\n");
    let stdin = note(2);
    let (code, out, err) = TOOL.cli(&[&a, "-", &b], &stdin);
    assert_eq!(code, 1, "{err}");
    let ns: Vec<u64> = records(&out)
        .into_iter()
        .filter(|v| v["kind"] == "note")
        .map(|v| v["n"].as_u64().unwrap())
        .collect();
    assert_eq!(ns, [1, 2, 3], "{out}");
    assert!(err.contains(&format!("{b}: line 2: not a record")), "{err}");
    let (code, _, err) = TOOL.cli(&["-", &a, "-"], &stdin);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("stdin (-) given twice"), "{err}");
}
