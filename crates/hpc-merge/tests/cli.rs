//! hpc-merge through its binary: sh5util against sacct, skewed clocks and a
//! truncated file, missing nodes, pass-through, bad input, a closed pipe.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use hpc_testkit::{num, records, status_to, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-merge"));
const T0: f64 = 1_700_000_000.0;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hpc-merge")
        .join(name)
}

fn job_summary(out: &str) -> Value {
    records(out)
        .into_iter()
        .find(|v| v["kind"] == "summary" && v.get("host").is_none())
        .expect("a job-wide summary")
}

/// The lines of one node's file: a meta, then `n` samples `dt` apart on a
/// clock `skew` seconds off. RSS rises to a peak mid-run and falls back.
fn node_lines(host: &str, skew: f64, n: usize, dt: f64, cores: f64, rss: f64) -> Vec<String> {
    let start = T0 + skew;
    let mut v = vec![format!(
        "{{\"kind\":\"meta\",\"job_id\":\"42\",\"host\":\"{host}\",\"start\":{start},\"interval_s\":{dt},\"req_cpus\":8,\"req_mem_mb\":4000,\"nnodes\":3,\"probe_version\":\"test\"}}"
    )];
    let mut cpu = 0.0;
    for i in 0..n {
        let t = start + (i + 1) as f64 * dt;
        let x = i as f64 / n as f64;
        let r = rss * (1.0 + (1.0 - (2.0 * x - 1.0).abs()));
        let c = cores + 0.1 * (i % 3) as f64;
        cpu += c * dt;
        v.push(format!(
            "{{\"kind\":\"sample\",\"t\":{t},\"host\":\"{host}\",\"job_id\":\"42\",\"rss_mb\":{r},\"cpu_cores\":{c},\"cpu_user_s\":{cpu},\"read_mbps\":2.0,\"lustre_meta_ops\":3.0}}"
        ));
    }
    v
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn sh5util_peak_equals_sacct_maxrss_of_step_17_0() {
    let (code, out, err) = TOOL.cli(
        &[
            "--from",
            "sh5util",
            "--step",
            "0",
            "--job-id",
            "17",
            fixture("extract_17_tasks_ts.csv").to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    // sacct's MaxRSS for 17.0, from the real sacct output.
    let header = std::fs::read_to_string(fixture("sacct_real_header.txt")).unwrap();
    let col = header
        .trim()
        .split('|')
        .position(|c| c == "MaxRSS")
        .unwrap();
    let steps = std::fs::read_to_string(fixture("sacct_real_steps.txt")).unwrap();
    let line = steps.lines().find(|l| l.starts_with("17.0|")).unwrap();
    let maxrss = line.split('|').nth(col).unwrap();
    assert_eq!(maxrss, "341216K");
    let kib: f64 = maxrss.trim_end_matches('K').parse().unwrap();
    let s = job_summary(&out);
    assert!((num(&s, "peak_rss_mb") - kib / 1024.0).abs() < 1e-6, "{s}");
    assert!((num(&s, "peak_rss_mb") - 333.2).abs() < 0.05);
    assert_eq!(s["job_id"], "17");
    // The series: one sample a second, with the job id and no host.
    let samples: Vec<Value> = records(&out)
        .into_iter()
        .filter(|v| v["kind"] == "sample")
        .collect();
    assert_eq!(samples.len(), 10);
    assert!(samples
        .iter()
        .all(|v| v["job_id"] == "17" && v.get("host").is_none()));
}

#[test]
fn sh5util_without_a_step_sums_the_steps() {
    let (code, out, _) = TOOL.cli(
        &[
            "--from",
            "sh5util",
            fixture("extract_17_tasks_ts.csv").to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 0);
    let s = job_summary(&out);
    assert!(
        (num(&s, "peak_rss_mb") - (341216.0 + 10920.0) / 1024.0).abs() < 1e-6,
        "{s}"
    );
}

#[test]
fn skewed_clocks_and_a_truncated_file_give_the_clean_summary() {
    let dir = tempfile::tempdir().unwrap();
    let n = 200;
    let dt = 5.0;
    let clean_dir = dir.path().join("clean");
    let skew_dir = dir.path().join("skew");
    std::fs::create_dir_all(&clean_dir).unwrap();
    std::fs::create_dir_all(&skew_dir).unwrap();
    let specs = [
        ("n1", 37.0, 4.0, 1000.0),
        ("n2", -20.0, 2.0, 500.0),
        ("n3", 3.0, 6.0, 2000.0),
    ];
    for (host, skew, cores, rss) in specs {
        let clean = node_lines(host, 0.0, n, dt, cores, rss).join("\n") + "\n";
        write(&clean_dir, &format!("{host}.ndjson"), &clean);
        let mut lines = node_lines(host, skew, n, dt, cores, rss);
        if host == "n1" {
            // Out of order, with a duplicate, and cut mid-line at the end.
            lines[1..].reverse();
            let dup = lines[5].clone();
            lines.insert(9, dup);
            let last = lines.pop().unwrap();
            lines.push(last[..last.len() / 2].to_string());
        }
        let mut text = lines.join("\n");
        if host != "n1" {
            text.push('\n');
        }
        write(&skew_dir, &format!("{host}.ndjson"), &text);
    }
    let (code, clean, err) = TOOL.cli(&[clean_dir.to_str().unwrap()], "");
    assert_eq!(code, 0, "{err}");
    let (code, skewed, err) = TOOL.cli(&[skew_dir.to_str().unwrap()], "");
    assert_eq!(code, 0, "a truncated last line is a warning: {err}");
    assert!(err.contains("truncated"), "{err}");
    let (a, b) = (job_summary(&clean), job_summary(&skewed));
    assert_eq!(a["nodes"], b["nodes"]);
    assert_eq!(num(&a, "grid_s"), dt);
    assert!(
        (num(&a, "duration_s") - num(&b, "duration_s")).abs() <= dt,
        "{a}\n{b}"
    );
    let rel = |k: &str, tol: f64| {
        let (x, y) = (num(&a, k), num(&b, k));
        assert!(
            (x - y).abs() <= tol * x.abs().max(1e-9),
            "{k}: clean {x}, skewed {y}"
        );
    };
    rel("peak_rss_mb", 0.01);
    rel("mean_rss_mb", 0.02);
    rel("mean_cpu_cores", 0.02);
    rel("node_cpu_cv", 0.02);
    rel("lustre_meta_ops", 0.02);
    // cpu_s: within one interval of the busiest node.
    assert!(
        (num(&a, "cpu_s") - num(&b, "cpu_s")).abs() <= 6.3 * dt,
        "{a}\n{b}"
    );
    assert_eq!(a["cpu_s_source"], "cumulative");
    let shifted: Vec<Value> = records(&skewed)
        .into_iter()
        .filter(|v| v["kind"] == "summary" && v.get("clock_shift_s").is_some())
        .collect();
    assert!(!shifted.is_empty(), "a node was shifted: {skewed}");
    // Per-node peaks and the duplicate.
    assert_eq!(b["peak_rss_mb_by_node"].as_object().unwrap().len(), 3);
    assert!(skewed.contains("\"duplicates\":1"), "{skewed}");
}

#[test]
fn missing_idle_and_imbalanced_nodes_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (host, cores) in [("n1", 4.0), ("n2", 4.0), ("n3", 0.0)] {
        let mut lines = node_lines(host, 0.0, 50, 1.0, cores, 100.0);
        // Flat busy cores so the CV is exact.
        for l in lines.iter_mut().skip(1) {
            let v: Value = serde_json::from_str(l).unwrap();
            let mut m = v.as_object().unwrap().clone();
            m.insert("cpu_cores".into(), cores.into());
            m.remove("cpu_user_s");
            *l = Value::Object(m).to_string();
        }
        files.push(write(
            dir.path(),
            &format!("{host}.ndjson"),
            &(lines.join("\n") + "\n"),
        ));
    }
    let mut args: Vec<&str> = vec![
        "--nodes",
        "n1,n2,n3,n4",
        "--series-path",
        "/x/42.series.ndjson.gz",
    ];
    args.extend(files.iter().map(String::as_str));
    let (code, out, err) = TOOL.cli(&args, "");
    assert_eq!(code, 0, "{err}");
    let s = job_summary(&out);
    assert_eq!(s["missing_nodes"], serde_json::json!(["n4"]));
    assert_eq!(s["idle_nodes"], serde_json::json!(["n3"]));
    assert_eq!(s["series"], "/x/42.series.ndjson.gz");
    assert!(
        (num(&s, "node_cpu_cv") - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-3,
        "{s}"
    );
    assert_eq!(num(&s, "req_cpus"), 24.0);
    // cpu_frac = busy cores / allocated CPUs.
    let sample = records(&out)
        .into_iter()
        .find(|v| v["kind"] == "sample")
        .unwrap();
    assert!(
        (num(&sample, "cpu_frac") - 8.0 / 24.0).abs() < 1e-6,
        "{sample}"
    );
    assert_eq!(s["cpu_s_source"], "integral");
    // Without names, the metas' nnodes (3) or --expect-nodes count them.
    let mut args = vec!["--expect-nodes", "4"];
    args.extend(files.iter().map(String::as_str));
    let (_, out, _) = TOOL.cli(&args, "");
    assert_eq!(
        job_summary(&out)["missing_nodes"],
        serde_json::json!(["unknown-1"])
    );
    let (_, out, _) = TOOL.cli(
        &files[..2].iter().map(String::as_str).collect::<Vec<_>>(),
        "",
    );
    assert_eq!(
        job_summary(&out)["missing_nodes"],
        serde_json::json!(["unknown-1"])
    );
}

#[test]
fn a_gap_longer_than_max_gap_is_not_bridged() {
    let dir = tempfile::tempdir().unwrap();
    let a = node_lines("a", 0.0, 100, 1.0, 1.0, 100.0);
    // b loses samples 30..70: a 40 s gap at 1 s sampling.
    let b: Vec<String> = node_lines("b", 0.0, 100, 1.0, 1.0, 100.0)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !(31..71).contains(i))
        .map(|(_, l)| l)
        .collect();
    let fa = write(dir.path(), "a.ndjson", &(a.join("\n") + "\n"));
    let fb = write(dir.path(), "b.ndjson", &(b.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&fa, &fb], "");
    assert_eq!(code, 0, "{err}");
    let at = |t: f64| {
        records(&out)
            .into_iter()
            .find(|v| v["kind"] == "sample" && v["t"].as_f64() == Some(t))
            .unwrap()
    };
    // Mid-gap only node a counts; just after the gap starts, b is held.
    assert!(
        (num(&at(T0 + 50.0), "cpu_cores") - 1.1).abs() < 0.25,
        "{}",
        at(T0 + 50.0)
    );
    assert!(num(&at(T0 + 31.0), "cpu_cores") > 1.9);
}

#[test]
fn job_records_and_other_kinds_pass_through() {
    let job = r#"{"kind":"job","cluster":"c","job_id":"42","job_id_raw":"42","state":"COMPLETED","is_final":true}"#;
    let mut lines = node_lines("n1", 0.0, 10, 1.0, 1.0, 10.0);
    lines.insert(1, job.to_string());
    let (code, out, err) = TOOL.cli(&["-"], &(lines.join("\n") + "\n"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().next().unwrap(), job);
    assert!(!out.contains("\"kind\":\"meta\""), "metas are consumed");
}

#[test]
fn malformed_lines_are_reported_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = node_lines("n1", 0.0, 10, 1.0, 1.0, 10.0);
    lines.insert(2, "{not json".into());
    lines.insert(4, r#"{"kind":"sample","rss_mb":1}"#.into());
    let p = write(dir.path(), "n1.ndjson", &(lines.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 1);
    assert!(err.contains("n1.ndjson: line 3: not a record"), "{err}");
    assert!(err.contains("n1.ndjson: line 5: sample without t"), "{err}");
    assert!(err.contains("2 of 13 input lines rejected"), "{err}");
    assert!(
        job_summary(&out)["peak_rss_mb"].is_number(),
        "good lines still count"
    );
}

#[test]
fn empty_input_gives_no_output() {
    let (code, out, err) = TOOL.cli(&[], "");
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
}

#[test]
fn bad_options_are_usage_errors() {
    assert_eq!(TOOL.cli(&["--grid", "0"], "").0, 2);
    assert_eq!(TOOL.cli(&["--from", "xml"], "").0, 2);
    assert_eq!(TOOL.cli(&["--step", "0"], "").0, 2);
    assert_eq!(TOOL.cli(&["--nope"], "").0, 2);
}

#[test]
fn a_fixed_grid_puts_samples_on_its_multiples() {
    let lines = node_lines("n1", 0.0, 100, 1.0, 1.0, 10.0);
    let (code, out, _) = TOOL.cli(&["--grid", "10"], &(lines.join("\n") + "\n"));
    assert_eq!(code, 0);
    let ts: Vec<f64> = records(&out)
        .into_iter()
        .filter(|v| v["kind"] == "sample")
        .map(|v| num(&v, "t"))
        .collect();
    assert_eq!(ts.len(), 11);
    assert!(ts.iter().all(|t| t % 10.0 == 0.0));
}

#[test]
fn help_lists_the_options() {
    let (code, out, _) = TOOL.cli(&["--help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("--grid") && out.contains("--max-gap"), "{out}");
}

#[test]
fn every_long_flag_in_help_is_in_the_man_page() {
    let (_, help, _) = TOOL.cli(&["--help"], "");
    assert!(TOOL.assert_help_in_man(&help).len() >= 10);
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let lines = node_lines("n1", 0.0, 60_000, 1.0, 1.0, 10.0);
    let p = write(dir.path(), "n1.ndjson", &(lines.join("\n") + "\n"));
    let first = TOOL.closed_pipe(&[p.as_str()], drop);
    assert!(first.starts_with("{\"kind\":\"sample\""));
}

/// One node's file as text: [`node_lines`] with `job` for the job id.
fn node_file(host: &str, job: &str, n: usize) -> String {
    node_lines(host, 0.0, n, 1.0, 2.0, 100.0)
        .iter()
        .map(|l| l.replace("\"job_id\":\"42\"", &format!("\"job_id\":\"{job}\"")))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn files_of_two_jobs_are_refused_and_job_picks_one() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.ndjson", &node_file("n1", "42", 20));
    let b = write(dir.path(), "b.ndjson", &node_file("n2", "42", 20));
    let c = write(dir.path(), "c.ndjson", &node_file("n3", "43", 20));
    for threads in ["1", "4"] {
        let (code, out, err) = TOOL.cli(&["--threads", threads, &a, &c, &b], "");
        assert_eq!(code, 1, "{err}");
        assert_eq!(out, "", "nothing is written");
        assert!(
            err.contains("c.ndjson: line 1: job 43, but")
                && err.contains("a.ndjson: line 1 is job 42"),
            "{err}"
        );
        assert!(err.contains("--job"), "{err}");
    }
    // --job picks one: the other job's records are skipped with a note.
    let (code, out, err) = TOOL.cli(&["--job", "42", &a, &c, &b], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "c.ndjson: 21 records of other jobs than 42 skipped (the first: line 1, job 43)"
        ),
        "{err}"
    );
    let s = job_summary(&out);
    assert_eq!(s["nodes"], serde_json::json!(["n1", "n2"]));
    assert_eq!(s["job_id"], "42");
    assert_eq!(num(&s, "req_cpus"), 16.0, "n3's meta is not counted: {s}");
    // Within one file: the line that names the second job.
    let mut mixed = node_file("n1", "42", 5);
    mixed.push_str(node_file("n1", "44", 5).lines().nth(3).unwrap());
    mixed.push('\n');
    let m = write(dir.path(), "m.ndjson", &mixed);
    let (code, out, err) = TOOL.cli(&[&m], "");
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("m.ndjson: line 7: job 44, but line 1 is job 42"),
        "{err}"
    );
}

#[test]
fn the_same_host_given_twice_is_merged_once() {
    let dir = tempfile::tempdir().unwrap();
    let text = node_file("n1", "42", 50);
    let a = write(dir.path(), "a.ndjson", &text);
    let copy = write(dir.path(), "copy.ndjson", &text);
    let other = write(dir.path(), "b.ndjson", &node_file("n2", "42", 50));
    let (code, once, err) = TOOL.cli(&[&a, &other], "");
    assert_eq!(code, 0, "{err}");
    let once = job_summary(&once);
    for args in [
        vec![a.as_str(), a.as_str(), other.as_str()],
        vec![a.as_str(), other.as_str(), copy.as_str()],
        vec!["--threads", "1", a.as_str(), copy.as_str(), other.as_str()],
    ] {
        let (code, out, err) = TOOL.cli(&args, "");
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("host n1 was already read from") && err.contains("merged once"),
            "{err}"
        );
        let s = job_summary(&out);
        for k in [
            "peak_rss_mb",
            "mean_rss_mb",
            "cpu_s",
            "mean_cpu_cores",
            "req_cpus",
        ] {
            assert_eq!(num(&s, k), num(&once, k), "{k}: {s}");
        }
        assert_eq!(s["nodes"], serde_json::json!(["n1", "n2"]));
        let per_node = records(&out)
            .into_iter()
            .filter(|v| v["kind"] == "summary" && v.get("host").is_some())
            .count();
        assert_eq!(per_node, 2);
    }
}

#[test]
fn a_bogus_first_sample_is_skipped_and_the_rest_merges() {
    let dir = tempfile::tempdir().unwrap();
    let clean = node_file("n1", "42", 100);
    let (code, want, err) = TOOL.cli(&["-"], &clean);
    assert_eq!(code, 0, "{err}");
    let want = job_summary(&want);
    let lines: Vec<String> = clean.lines().map(str::to_owned).collect();
    for bogus in ["0", "4102444800"] {
        let bad = lines[1].replace(&format!("\"t\":{}", T0 + 1.0), &format!("\"t\":{bogus}"));
        assert_ne!(bad, lines[1]);
        let mut with_meta = lines.clone();
        with_meta.insert(1, bad.clone());
        // With a meta, and without one (then the sample times alone anchor).
        let without_meta = with_meta[1..].to_vec();
        for (text, line) in [(with_meta, 2), (without_meta, 1)] {
            let p = write(dir.path(), "n1.ndjson", &(text.join("\n") + "\n"));
            let (code, out, err) = TOOL.cli(&[&p], "");
            assert_eq!(code, 1, "{err}");
            assert!(
                err.contains(&format!(
                    "n1.ndjson: line {line}: t {bogus} is more than 62 days"
                )),
                "{err}"
            );
            assert!(
                err.contains("1 of 102 input lines rejected") || line == 1,
                "{err}"
            );
            let s = job_summary(&out);
            for k in [
                "peak_rss_mb",
                "mean_rss_mb",
                "duration_s",
                "cpu_s",
                "samples",
            ] {
                assert_eq!(num(&s, k), num(&want, k), "{k}: {s}");
            }
        }
    }
}

#[test]
fn sizes_from_flags_and_data_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "n1.ndjson", &node_file("n1", "42", 10));
    for args in [
        vec!["--grid", "1e-9"],
        vec!["--grid", "1e300"],
        vec!["--expect-nodes", "999999999"],
        vec!["--job", ""],
    ] {
        let (code, out, err) = TOOL.cli(&[args.clone(), vec![p.as_str()]].concat(), "");
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(err.contains(args[0]), "{err}");
    }
    // A meta that claims 3 million nodes is a bad meta: reported, the
    // samples still merge, no million "unknown" nodes.
    let text = node_file("n1", "42", 10).replacen("\"nnodes\":3", "\"nnodes\":3000000", 1);
    let big = write(dir.path(), "big.ndjson", &text);
    let (code, out, err) = TOOL.cli(&[&big], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("big.ndjson: line 1: bad meta: nnodes 3000000 is more than the 200000 nodes"),
        "{err}"
    );
    let s = job_summary(&out);
    assert_eq!(s["nodes"], serde_json::json!(["n1"]));
    assert!(s.get("expected_nodes").is_none(), "{s}");
    // The finest grid over a long run: a sample past the bound in bins
    // (5356800, here 6000 s at 1 ms) is refused, with the way out.
    let long = node_lines("n1", 0.0, 2, 6000.0, 1.0, 10.0).join("\n") + "\n";
    let (code, out, err) = TOOL.cli(&["--grid", "0.001"], &long);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("coarser --grid"), "{err}");
    assert!(job_summary(&out)["peak_rss_mb"].is_number());
}

/// The peak resident memory of a process, KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn an_endless_line_is_skipped_in_bounded_memory() {
    // A 17 MiB line between good ones: refused by number, the rest is read.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = node_lines("n1", 0.0, 10, 1.0, 1.0, 10.0);
    lines.insert(
        5,
        format!(
            "{{\"kind\":\"sample\",\"note\":\"{}\"}}",
            "x".repeat(17 << 20)
        ),
    );
    let p = write(dir.path(), "n1.ndjson", &lines.join("\n"));
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("n1.ndjson: line 6: line longer than 16777216 bytes: skipped"),
        "{err}"
    );
    assert_eq!(num(&job_summary(&out), "samples"), 10.0, "{out}");
    // An endless line: memory stays bounded while it is read.
    let mut child = TOOL
        .command(&["/dev/zero"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut peak = 0;
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        peak = peak.max(peak_kib(child.id()));
        if peak > 256 << 10 {
            break;
        }
    }
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(still_running, "it reads on");
    assert!(peak < 256 << 10, "peak RSS {peak} KiB");
}

#[test]
fn file_names_are_escaped_and_a_full_stderr_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = node_lines("n1", 0.0, 5, 1.0, 1.0, 10.0);
    lines.insert(2, "{not json".into());
    let p = write(
        dir.path(),
        "bad\nname\x1b[31m.ndjson",
        &(lines.join("\n") + "\n"),
    );
    let (code, _, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("bad\\nname\\u{1b}[31m.ndjson: line 3: not a record"),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "{err}");
    let (code, _, err) = TOOL.cli(&[dir.path().join("no\nsuch").to_str().unwrap()], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot open ") && err.contains("no\\nsuch"),
        "{err}"
    );
    // With stderr on a full device: rejects, warnings and errors still
    // give their exit codes, never a panic (101).
    let c = |args: &[&str]| {
        status_to(
            &mut TOOL.command(args),
            Stdio::null(),
            "/dev/null",
            "/dev/full",
        )
    };
    assert_eq!(c(&[&p, &p]), Some(1));
    assert_eq!(c(&["/nonexistent/x.ndjson"]), Some(1));
    assert_eq!(c(&["--grid", "0"]), Some(2));
}

/// A node whose memory spiked between two samples: its sampled RSS peak is
/// below another node's, but the kernel's high-water mark (`hwm_mb`) kept
/// the spike. Each node's largest high-water mark is in its summary and in
/// the job-wide `hwm_mb_by_node` (what hpc-flags names the node that ran out
/// by).
#[test]
fn each_nodes_high_water_mark_is_kept_beside_its_sampled_peak() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (host, rss, spike) in [("n1", 400.0, 410.0), ("n2", 300.0, 1024.0)] {
        let mut lines = node_lines(host, 0.0, 20, 1.0, 1.0, rss / 2.0);
        for (i, l) in lines.iter_mut().enumerate().skip(1) {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let hwm = if i >= 15 { spike } else { rss / 2.0 };
            v["hwm_mb"] = hwm.into();
            *l = v.to_string();
        }
        files.push(write(
            dir.path(),
            &format!("{host}.ndjson"),
            &(lines.join("\n") + "\n"),
        ));
    }
    let (code, out, err) = TOOL.cli(&[&files[0], &files[1]], "");
    assert_eq!(code, 0, "{err}");
    let s = job_summary(&out);
    let peaks = s["peak_rss_mb_by_node"].as_object().unwrap();
    assert!(peaks["n1"].as_f64() > peaks["n2"].as_f64(), "{s}");
    assert_eq!(s["hwm_mb_by_node"]["n1"], 410.0, "{s}");
    assert_eq!(s["hwm_mb_by_node"]["n2"], 1024.0, "{s}");
    let n2 = records(&out)
        .into_iter()
        .find(|v| v["kind"] == "summary" && v["host"] == "n2")
        .unwrap();
    assert_eq!(n2["hwm_mb"], 1024.0, "{n2}");
}

// Issue 31: a probe that reads the processes' CPU only on detail samples
// (a job cgroup with the memory alone) writes the busy cores on those
// samples only, and those rates miss the CPU of processes that ended
// between two readings (their parent's cumulative times hold it). A node's
// mean busy cores is the increase of its cumulative CPU times over the
// sampled span: the mean of the few rates read a node busy on 2 cores as
// 0.64 on the test cluster, and node_imbalance was missed.
#[test]
fn a_node_with_sparse_rates_has_its_busy_cores_from_its_cpu_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![format!(
        "{{\"kind\":\"meta\",\"job_id\":\"42\",\"host\":\"n1\",\"start\":{T0},\"interval_s\":1,\"req_cpus\":2,\"nnodes\":1,\"probe_version\":\"test\"}}"
    )];
    for i in 0..21 {
        let t = T0 + i as f64;
        // 2 busy cores throughout; a rate of 0.6 on every 5th sample.
        let rate = if i > 0 && i % 5 == 0 {
            ",\"cpu_cores\":0.6".to_string()
        } else {
            String::new()
        };
        lines.push(format!(
            "{{\"kind\":\"sample\",\"t\":{t},\"host\":\"n1\",\"job_id\":\"42\",\"rss_mb\":100,\"cpu_user_s\":{}{rate}}}",
            2.0 * i as f64
        ));
    }
    let f = write(dir.path(), "n1.ndjson", &(lines.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&f], "");
    assert_eq!(code, 0, "{err}");
    let node = records(&out)
        .into_iter()
        .find(|v| v["kind"] == "summary" && v["host"] == "n1")
        .expect("the node's summary");
    let cores = num(&node, "mean_cpu_cores");
    assert!((cores - 2.0).abs() < 0.05, "{node}");
}

#[test]
fn readings_no_meter_gives_are_rejected_with_their_line() {
    // rss_mb -5 and 1e308 were merged: the peak was 1e308, and two nodes'
    // summed to null with exit 0.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = node_lines("n1", 0.0, 10, 1.0, 1.0, 10.0);
    lines.insert(
        3,
        format!(
            r#"{{"kind":"sample","t":{},"host":"n1","rss_mb":-5}}"#,
            T0 + 2.5
        ),
    );
    lines.insert(
        5,
        format!(
            r#"{{"kind":"sample","t":{},"host":"n1","rss_mb":1e308}}"#,
            T0 + 3.5
        ),
    );
    let p = write(dir.path(), "n1.ndjson", &(lines.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 4: sample: rss_mb -5 is not a reading"),
        "{err}"
    );
    assert!(
        err.contains("line 6: sample: rss_mb 1e308 is not a reading"),
        "{err}"
    );
    let peak = num(&job_summary(&out), "peak_rss_mb");
    assert!(peak < 100.0, "{peak}");
}

#[test]
fn a_counter_that_dips_is_not_counted_twice() {
    // read_mb 0, 101, 102, 103, 104, 103.5, 106 ... 110: a dip (a process
    // left the summed set) was a reset, and the total 214. So was a larger
    // one (0, 60, 120, 20, 25: a process that had read 100 left): 145 for
    // 125.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![format!(
        r#"{{"kind":"meta","job_id":"42","host":"n1","start":{T0},"interval_s":1,"probe_version":"test"}}"#
    )];
    let reads = [
        0.0, 101.0, 102.0, 103.0, 104.0, 103.5, 106.0, 107.0, 108.0, 109.0, 110.0,
    ];
    for (i, r) in reads.iter().enumerate() {
        lines.push(format!(
            r#"{{"kind":"sample","t":{},"host":"n1","job_id":"42","read_mb":{r}}}"#,
            T0 + i as f64
        ));
    }
    let p = write(dir.path(), "n1.ndjson", &(lines.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 0, "{err}");
    // 104, then from the dip's 103.5 on to 110: 110.5 (what left at the dip
    // was counted before it).
    let read = num(&job_summary(&out), "read_mb");
    assert!((read - 110.5).abs() < 1e-6, "{read}");
    let mut lines = vec![lines[0].clone()];
    for (i, r) in [0.0, 60.0, 120.0, 20.0, 25.0].iter().enumerate() {
        lines.push(format!(
            r#"{{"kind":"sample","t":{},"host":"n1","job_id":"42","read_mb":{r}}}"#,
            T0 + i as f64
        ));
    }
    let p = write(dir.path(), "n2.ndjson", &(lines.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 0, "{err}");
    let read = num(&job_summary(&out), "read_mb");
    assert!((read - 125.0).abs() < 1e-6, "{read}");
}

#[test]
fn a_nodes_mean_cores_leave_out_what_its_counters_held_at_the_start() {
    // A probe attached to a process that had run an hour (cpu_user_s from
    // 3600 on, one core busy): the node's mean_cpu_cores was 361 on 4 CPUs.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![format!(
        r#"{{"kind":"meta","job_id":"42","host":"n1","start":{T0},"interval_s":1,"req_cpus":4,"probe_version":"test"}}"#
    )];
    for i in 0..=10 {
        let cores = if i == 0 {
            String::new()
        } else {
            ",\"cpu_cores\":1".into()
        };
        lines.push(format!(
            r#"{{"kind":"sample","t":{},"host":"n1","job_id":"42","cpu_user_s":{}{cores}}}"#,
            T0 + i as f64,
            3600 + i
        ));
    }
    let p = write(dir.path(), "n1.ndjson", &(lines.join("\n") + "\n"));
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 0, "{err}");
    let node = records(&out)
        .into_iter()
        .find(|v| v["kind"] == "summary" && v["host"] == "n1")
        .expect("the node's summary");
    let mean = num(&node, "mean_cpu_cores");
    assert!((mean - 1.0).abs() < 1e-6, "{mean}");
}

/// One node sampled every 5 s: `f(i)` gives the extra fields of the sample
/// at 5 i s (i from 0 to 4).
fn five_second_node(f: impl Fn(usize) -> String) -> String {
    let mut lines = vec![format!(
        r#"{{"kind":"meta","job_id":"42","host":"n1","start":{T0},"interval_s":5,"probe_version":"test"}}"#
    )];
    for i in 0..5 {
        lines.push(format!(
            r#"{{"kind":"sample","t":{},"host":"n1","job_id":"42"{}}}"#,
            T0 + 5.0 * i as f64,
            f(i)
        ));
    }
    lines.join("\n") + "\n"
}

#[test]
fn rates_count_for_their_whole_interval_whatever_the_grid() {
    // Four 5 s intervals at 10 MB/s and one busy core: 200 MB and 20 CPU
    // seconds. The last rate counted for one 1 s bin: 160 and 16 (200 and
    // 20 only with --grid 5).
    let dir = tempfile::tempdir().unwrap();
    let text = five_second_node(|i| {
        if i == 0 {
            String::new()
        } else {
            r#","write_mbps":10,"cpu_cores":1"#.into()
        }
    });
    let p = write(dir.path(), "n1.ndjson", &text);
    for grid in [None, Some("1"), Some("5")] {
        let mut args = vec![p.as_str()];
        if let Some(g) = grid {
            args.extend(["--grid", g]);
        }
        let (code, out, err) = TOOL.cli(&args, "");
        assert_eq!(code, 0, "{err}");
        let job = job_summary(&out);
        assert!(
            (num(&job, "write_mb") - 200.0).abs() < 1e-6,
            "{grid:?}: {job}"
        );
        assert!((num(&job, "cpu_s") - 20.0).abs() < 1e-6, "{grid:?}: {job}");
    }
}

#[test]
fn the_jobs_mean_cores_is_a_time_mean_like_its_nodes() {
    // Two busy cores for 10 s, then idle for 10 s, sampled every 5 s: 1.0
    // core over the 20 s. The job-wide figure was the mean of its 1 s
    // bins, 1.25 (the last interval one bin, the first none), beside the
    // node's 1.0.
    let dir = tempfile::tempdir().unwrap();
    let cpu = [0, 10, 20, 20, 20];
    let cores = [
        "",
        r#","cpu_cores":2"#,
        r#","cpu_cores":2"#,
        r#","cpu_cores":0"#,
        r#","cpu_cores":0"#,
    ];
    let text = five_second_node(|i| format!(r#","cpu_user_s":{}{}"#, cpu[i], cores[i]));
    let p = write(dir.path(), "n1.ndjson", &text);
    let (code, out, err) = TOOL.cli(&[&p], "");
    assert_eq!(code, 0, "{err}");
    let job = job_summary(&out);
    let node = records(&out)
        .into_iter()
        .find(|v| v["kind"] == "summary" && v["host"] == "n1")
        .unwrap();
    assert!((num(&node, "mean_cpu_cores") - 1.0).abs() < 1e-6, "{node}");
    assert!((num(&job, "mean_cpu_cores") - 1.0).abs() < 1e-6, "{job}");
}
