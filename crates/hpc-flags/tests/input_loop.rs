//! hpc-flags reads its inputs through the shared loop: files and stdin in
//! the order given (issue 9), stdin at most once.

use std::process::{Command, Stdio};

/// Runs hpc-flags with `args`, the file `stdin` on its stdin; returns
/// (exit code, stdout, stderr).
fn flags(args: &[&str], stdin: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hpc-flags"))
        .args(args)
        .stdin(Stdio::from(std::fs::File::open(stdin).unwrap()))
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

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
    let stdin = path("stdin.ndjson", note(2));
    let (code, out, err) = flags(&[&a, "-", &b], stdin.as_ref());
    assert_eq!(code, Some(1), "{err}");
    let ns: Vec<u64> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "note")
        .map(|v| v["n"].as_u64().unwrap())
        .collect();
    assert_eq!(ns, [1, 2, 3], "{out}");
    assert!(err.contains(&format!("{b}: line 2: not a record")), "{err}");
    let (code, _, err) = flags(&["-", &a, "-"], stdin.as_ref());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("stdin (-) given twice"), "{err}");
}
