//! The shared input loop (`hpc_core::input`) over real files and a stdin
//! stand-in: order, line numbers and places, rejects, the cut last line.

use std::path::Path;

use hpc_core::input::{for_each_line, for_each_record, for_each_typed, Input, Inputs};
use hpc_core::ndjson::{Rejects, MAX_LINE};
use hpc_core::record::Meta;
use hpc_core::Error;

fn write(dir: &Path, name: &str, text: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Every line handed over, as `source:number:text`.
fn lines_of(inputs: &Inputs, stdin: &[u8], rejects: &mut Rejects) -> (Vec<String>, u64) {
    let mut got = Vec::new();
    let n = for_each_line(inputs, stdin, rejects, |_, l| {
        got.push(format!(
            "{}:{}:{}",
            l.source.unwrap_or("stdin"),
            l.number,
            l.text
        ));
        Ok(())
    })
    .unwrap();
    (got, n)
}

#[test]
fn files_and_stdin_are_read_in_the_order_given_with_numbers_per_input() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", b"a1\n\n  \na4\n");
    let b = write(dir.path(), "b", b"b1\r\nb2");
    let inputs = Inputs::new(vec![b.clone(), "-".into(), a.clone()]).unwrap();
    let mut rejects = Rejects::new("t");
    let (got, n) = lines_of(&inputs, b"s1\n", &mut rejects);
    assert_eq!(
        got,
        [
            format!("{b}:1:b1"),
            format!("{b}:2:b2"),
            "stdin:1:s1".into(),
            format!("{a}:1:a1"),
            format!("{a}:4:a4"),
        ]
    );
    // Blank lines are counted, not handed over.
    assert_eq!((n, rejects.rejected), (7, 0));
    assert!(rejects.finish(n).is_ok());
}

#[test]
fn no_names_is_stdin_and_stdin_twice_is_a_usage_error() {
    let inputs = Inputs::new(Vec::new()).unwrap();
    assert_eq!(inputs.names(), ["-"]);
    assert!(inputs.reads_stdin());
    let (got, _) = lines_of(&inputs, b"x\n", &mut Rejects::new("t"));
    assert_eq!(got, ["stdin:1:x"]);
    let twice = Inputs::new(vec!["-".into(), "f".into(), "-".into()]);
    assert!(matches!(twice, Err(Error::Usage(m)) if m.contains("stdin (-) given twice")));
}

#[test]
fn bad_lines_are_rejected_with_file_and_line_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"ok\n\xff\xfe\n".to_vec();
    text.extend(std::iter::repeat_n(b'x', MAX_LINE + 1));
    text.extend_from_slice(b"\nlast\n");
    let f = write(dir.path(), "bad.txt", &text);
    let inputs = Inputs::new(vec![f.clone()]).unwrap();
    let mut rejects = Rejects::new("t");
    let (got, n) = lines_of(&inputs, b"", &mut rejects);
    assert_eq!(got, [format!("{f}:1:ok"), format!("{f}:4:last")]);
    assert_eq!((n, rejects.rejected), (4, 2));
    assert!(matches!(
        rejects.finish(n),
        Err(Error::Rejected {
            rejected: 2,
            total: 4
        })
    ));
    // With --strict the first bad line stops the run, named with its place.
    let mut strict = Rejects::new("t");
    strict.strict = true;
    let err = for_each_line(&inputs, &b""[..], &mut strict, |_, _| Ok(())).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{f}: line 2: not valid UTF-8 (byte 0)")
    );
}

#[test]
fn a_file_that_cannot_be_opened_stops_the_run_after_the_inputs_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", b"a1\n");
    let missing = dir.path().join("no\nsuch").to_str().unwrap().to_string();
    let inputs = Inputs::new(vec![a, missing]).unwrap();
    let mut seen = 0;
    let err = for_each_line(&inputs, &b""[..], &mut Rejects::new("t"), |_, _| {
        seen += 1;
        Ok(())
    })
    .unwrap_err();
    assert_eq!(seen, 1);
    let msg = err.to_string();
    assert!(
        msg.starts_with("cannot open ") && msg.contains("no\\nsuch"),
        "{msg}"
    );
}

#[test]
fn a_read_error_names_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().to_str().unwrap().to_string();
    let inputs = Inputs::new(vec![name.clone()]).unwrap();
    let err = for_each_line(&inputs, &b""[..], &mut Rejects::new("t"), |_, _| Ok(())).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot read {name}: ")),
        "{err}"
    );
}

#[test]
fn an_error_of_the_caller_stops_the_loop() {
    let inputs = Inputs::new(Vec::new()).unwrap();
    let mut seen = Vec::new();
    let err = for_each_line(
        &inputs,
        &b"1\n2\n3\n"[..],
        &mut Rejects::new("t"),
        |_, l| {
            seen.push(l.number);
            match l.text {
                "2" => Err(Error::Other("stop".into())),
                _ => Ok(()),
            }
        },
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "stop");
    assert_eq!(seen, [1, 2]);
}

/// The lines `for_each_record` hands over as `kind:number`, the rejects
/// and the count of lines, for `text` on stdin.
fn records(text: &str, strict: bool) -> (Vec<String>, u64, Result<u64, Error>) {
    let inputs = Inputs::new(Vec::new()).unwrap();
    let mut rejects = Rejects::new("t");
    rejects.strict = strict;
    let mut got = Vec::new();
    let r = for_each_record(&inputs, text.as_bytes(), &mut rejects, |_, kind, l| {
        got.push(format!("{kind}:{}", l.number));
        Ok(())
    });
    (got, rejects.rejected, r)
}

#[test]
fn records_come_with_their_kind_and_bad_ones_are_rejected() {
    let text = "{\"kind\":\"sample\",\"t\":1}\nnot json\n{\"t\":1}\n{\"kind\":3}\n\
                {\"kind\":\"j\\u006fb\"}\n{\"kind\":\"meta\"";
    let (got, rejected, r) = records(text, false);
    assert_eq!(got, ["sample:1", "job:5"]);
    // The cut last record is a warning, not a reject.
    assert_eq!((rejected, r.unwrap()), (3, 6));
    let (_, _, r) = records("{\"kind\":\"a\"}\nnot json\n", true);
    let msg = r.unwrap_err().to_string();
    assert!(msg.starts_with("line 2: not a record: "), "{msg}");
    let (_, _, r) = records("{\"t\":1}\n", true);
    assert_eq!(r.unwrap_err().to_string(), "line 1: no \"kind\"");
}

#[test]
fn only_a_cut_record_on_the_last_line_is_tolerated() {
    // Cut mid-record, but not the last line: a reject.
    let (_, rejected, _) = records("{\"kind\":\"a\",\"t\":\n{\"kind\":\"a\"}\n", false);
    assert_eq!(rejected, 1);
    // A last line without its newline that is not the start of a record.
    let (_, rejected, _) = records("{\"kind\":\"a\"}\ngarbage", false);
    assert_eq!(rejected, 1);
    // A whole last record without its newline is read as any other.
    let (got, rejected, _) = records("{\"kind\":\"a\"}\n{\"kind\":\"b\"}", false);
    assert_eq!((got, rejected), (vec!["a:1".into(), "b:2".into()], 0));
    // The cut record: only warned about, even under --strict.
    let (got, rejected, r) = records("{\"kind\":\"a\"}\n{\"kind\":\"b\",\"t\":1", true);
    assert_eq!((got, rejected, r.unwrap()), (vec!["a:1".into()], 0, 2));
}

#[test]
fn typed_records_of_one_kind_and_a_bad_one_named_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let meta = r#"{"kind":"meta","job_id":"7","host":"n1","start":5.0,"interval_s":1.0,"probe_version":"x"}"#;
    let text = format!(
        "{meta}\n{{\"kind\":\"sample\",\"t\":1}}\n{{\"kind\":\"meta\",\"host\":\"n2\"}}\n{}\n",
        meta.replace("n1", "n3")
    );
    let f = write(dir.path(), "m.ndjson", text.as_bytes());
    let inputs = Inputs::new(vec![f.clone()]).unwrap();
    let mut rejects = Rejects::new("t");
    let mut hosts = Vec::new();
    let n = for_each_typed(&inputs, &b""[..], &mut rejects, "meta", |_, m: Meta, l| {
        hosts.push((m.host, m.start, l.number));
        Ok(())
    })
    .unwrap();
    assert_eq!(hosts, [("n1".into(), 5.0, 1), ("n3".into(), 5.0, 4)]);
    assert_eq!((n, rejects.rejected), (4, 1));
    let mut strict = Rejects::new("t");
    strict.strict = true;
    let err = for_each_typed(&inputs, &b""[..], &mut strict, "meta", |_, _: Meta, _| {
        Ok(())
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(&format!("{f}: line 3: bad meta: missing field")),
        "{err}"
    );
}

#[test]
fn one_input_at_a_time_for_state_kept_per_input() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", b"1\n2\n");
    let inputs = Inputs::new(vec!["-".into(), a.clone()]).unwrap();
    let mut rejects = Rejects::new("t");
    let mut per_input = Vec::new();
    inputs
        .for_each(&b"x\n"[..], |input: Input| {
            let shown = input.shown();
            let mut texts = String::new();
            let n = input.for_each_line(&mut rejects, |_, l| {
                texts.push_str(l.text);
                Ok(())
            })?;
            per_input.push((shown, texts, n));
            Ok(())
        })
        .unwrap();
    assert_eq!(
        per_input,
        [("stdin".into(), "x".into(), 1), (a, "12".into(), 2)]
    );
}

#[test]
fn raw_lines_come_before_the_utf8_check_which_text_makes() {
    let input = Input::new("f", &b"ok\n\xffbad\n \t\x0b\n\xc2\xa0\nlast"[..]);
    let mut rejects = Rejects::new("t");
    let mut got = Vec::new();
    let n = input
        .for_each_raw_line(&mut rejects, |rejects, raw| {
            let text = raw.text(rejects)?.map(|l| l.text.to_string());
            got.push((raw.number, raw.bytes.to_vec(), text, raw.unterminated));
            Ok(())
        })
        .unwrap();
    assert_eq!(n, 5);
    assert_eq!(
        got,
        [
            (1, b"ok".to_vec(), Some("ok".into()), false),
            // Handed over as bytes; as text it is rejected.
            (2, b"\xffbad".to_vec(), None, false),
            // Line 3 is ASCII white space only: skipped. A no-break space
            // is white space too, once read as text.
            (4, b"\xc2\xa0".to_vec(), None, false),
            (5, b"last".to_vec(), Some("last".into()), true),
        ]
    );
    assert_eq!(rejects.rejected, 1);
}
