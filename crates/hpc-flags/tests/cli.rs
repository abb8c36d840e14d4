//! hpc-flags: each flag raised by a fixture and not by a near miss, a noisy
//! healthy job that raises nothing, and the command-line behaviour.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use hpc_flags::rules::RULES;
use hpc_flags::thresholds::Thresholds;
use hpc_flags::Opts;
use hpc_testkit::{status_to, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-flags"));

/// Runs the library on `input` with `sets` overrides; returns the output.
fn flags_of(input: &str, sets: &[&str]) -> String {
    let mut th = Thresholds::default();
    for s in sets {
        th.set_pair(s).unwrap();
    }
    let opts = Opts {
        thresholds: th,
        ..Default::default()
    };
    let mut out = Vec::new();
    hpc_flags::run(&opts, input.as_bytes(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn raised(output: &str) -> Vec<String> {
    output
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "flag")
        .map(|v| v["flag"].as_str().unwrap().to_owned())
        .collect()
}

fn has(output: &str, flag: &str) -> bool {
    raised(output).iter().any(|f| f == flag)
}

/// A job-wide sample series: `n` samples `dt` seconds apart; `f(i)` gives
/// the extra JSON fields of sample `i`.
fn series(job: &str, n: usize, dt: f64, f: impl Fn(usize) -> String) -> String {
    let mut s = String::new();
    for i in 0..n {
        let t = 1_700_000_000.0 + i as f64 * dt;
        s.push_str(&format!(
            "{{\"kind\":\"sample\",\"t\":{t},\"job_id\":\"{job}\",{}}}\n",
            f(i)
        ));
    }
    s
}

fn job(fields: &str) -> String {
    format!("{{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"1\",\"job_id_raw\":\"1\",\"is_final\":true,{fields}}}\n")
}

fn idle_share(idle: usize) -> String {
    series("1", 100, 10.0, |i| {
        format!("\"cpu_frac\":{}", if i < idle { 0.01 } else { 0.8 })
    })
}

fn single(cpus: u32, cpu: f64) -> String {
    job(&format!(
        "\"state\":\"COMPLETED\",\"alloc_cpus\":{cpus},\"elapsed_s\":1000,\"total_cpu_s\":{cpu}"
    ))
}

fn spike(later: f64) -> String {
    series("1", 100, 10.0, |i| {
        let rss = match i {
            0..=2 => 200.0,
            3..=5 => 1000.0,
            _ => 1000.0 * later,
        };
        format!("\"rss_mb\":{rss}")
    })
}

fn io(share: usize, lustre: bool) -> String {
    series("1", 100, 10.0, |i| {
        let busy = i < share;
        let (mb, frac) = if busy {
            (if lustre { 60.0 } else { 20.0 }, 0.05)
        } else {
            (1.0, 0.7)
        };
        if lustre {
            format!("\"lustre_read_mbps\":{mb},\"lustre_write_mbps\":0,\"cpu_frac\":{frac}")
        } else {
            format!("\"read_mbps\":{mb},\"write_mbps\":0,\"cpu_frac\":{frac}")
        }
    })
}

fn mean_of(field: &str, v: f64) -> String {
    series("1", 20, 10.0, |_| format!("\"{field}\":{v}"))
}

/// A small deterministic generator (xorshift), for noise with a fixed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [-1, 1).
    fn sym(&mut self) -> f64 {
        self.next() * 2.0 - 1.0
    }
}

/// 300 samples of 30 s: busy cores around 8, dropping to `after` x 8 at
/// `at` (a share of the run).
fn dies(at: f64, after: f64) -> String {
    let r = std::cell::RefCell::new(Rng(7));
    let n = 300;
    series("1", n, 30.0, |i| {
        let level = if (i as f64) < at * n as f64 {
            8.0
        } else {
            8.0 * after
        };
        let cores = (level + 0.3 * r.borrow_mut().sym()).max(0.0);
        format!("\"cpu_cores\":{cores}")
    })
}

fn node_cv(cv: f64) -> String {
    format!(
        "{{\"kind\":\"summary\",\"job_id\":\"1\",\"nodes\":[\"a\",\"b\"],\"node_cpu_cv\":{cv}}}\n"
    )
}

/// 4 nodes of 16 CPUs for 1000 s: one node's capacity is 16000 CPU-s.
fn on_four_nodes(cpu: f64) -> String {
    job(&format!(
        "\"state\":\"COMPLETED\",\"alloc_cpus\":64,\"nnodes\":4,\"elapsed_s\":1000,\"total_cpu_s\":{cpu}"
    ))
}

/// A GPU job as sacct knows it: mean utilisation and peak GPU memory.
fn gpu_job(util: f64, mem: u32) -> String {
    job(&format!(
        "\"state\":\"COMPLETED\",\"alloc_gpus\":1,\"gpu_util\":{util},\"gpu_mem_max_mb\":{mem}"
    ))
}

/// A merged GPU job whose one GPU peaked at `share` of its memory.
fn gpu_peak(share: f64) -> String {
    format!(
        "{{\"kind\":\"summary\",\"job_id\":\"1\",\"gpus\":[{{\"gpu_index\":0,\"peak_util\":90,\"peak_mem_mb\":{},\"mem_total_mb\":1000,\"max_procs\":1}}]}}\n",
        share * 1000.0
    )
}

/// Each flag's case: an input that raises it and a near miss that does
/// not, just on either side of its default threshold.
fn case(flag: &str) -> Option<(String, String)> {
    let state = |s: &str| job(&format!("\"state\":\"{s}\""));
    let mem = |rss: u32| {
        job(&format!(
            "\"state\":\"COMPLETED\",\"req_mem_mb\":1000,\"max_rss_mb\":{rss}"
        ))
    };
    Some(match flag {
        "oom_killed" => (state("OUT_OF_MEMORY"), state("FAILED")),
        "timed_out" => (state("TIMEOUT"), state("COMPLETED")),
        "mem_overrequest" => (mem(240), mem(260)),
        "idle_cpu" => (idle_share(51), idle_share(49)),
        "single_threaded" => (single(4, 1450.0), single(4, 1550.0)),
        "mem_spike_plateau" => (spike(0.58), spike(0.62)),
        "io_dominant" => (io(51, false), io(49, false)),
        "lustre_metadata_heavy" => (
            mean_of("lustre_meta_ops", 105.0),
            mean_of("lustre_meta_ops", 95.0),
        ),
        "lustre_io_dominant" => (io(51, true), io(49, true)),
        "high_cpi" => (mean_of("cpi", 1.05), mean_of("cpi", 0.95)),
        "cache_thrashing" => (
            mean_of("cache_miss_rate", 0.55),
            mean_of("cache_miss_rate", 0.45),
        ),
        "numa_misplaced" => (
            mean_of("numa_miss_rate", 0.22),
            mean_of("numa_miss_rate", 0.18),
        ),
        "catastrophe" => (dies(0.4, 0.01), dies(0.4, 0.25)),
        "node_imbalance" => (node_cv(1.05), node_cv(0.95)),
        "idle_nodes" => (on_four_nodes(7600.0), on_four_nodes(8400.0)),
        "gpu_idle" => (gpu_job(4.9, 100), gpu_job(5.1, 100)),
        "gpu_unused" => (gpu_job(0.9, 0), gpu_job(1.1, 0)),
        "gpu_mem_low" => (gpu_peak(0.24), gpu_peak(0.26)),
        _ => return None,
    })
}

/// Every rule of the table has a case above, raises its flag on the case's
/// input and not on the near miss.
#[test]
fn every_rule_is_raised_by_its_case_and_not_by_its_near_miss() {
    let mut wrong = Vec::new();
    for rule in RULES {
        let Some((hit, miss)) = case(rule.flag) else {
            wrong.push(format!(
                "{}: no raise and near-miss case in case()",
                rule.flag
            ));
            continue;
        };
        let h = flags_of(&hit, &[]);
        if !has(&h, rule.flag) {
            wrong.push(format!("{} not raised:\n{h}", rule.flag));
        }
        let m = flags_of(&miss, &[]);
        if has(&m, rule.flag) {
            wrong.push(format!("{} raised on the near miss:\n{m}", rule.flag));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_threshold_override_moves_the_line() {
    let (_, miss) = case("mem_overrequest").unwrap();
    assert!(!has(&flags_of(&miss, &[]), "mem_overrequest"));
    assert!(has(
        &flags_of(&miss, &["mem_overrequest=0.3"]),
        "mem_overrequest"
    ));
}

#[test]
fn idle_cpu_weights_samples_by_duration() {
    // 10 idle samples of 30 s (300 s) against 40 busy ones of 5 s (200 s).
    let mut s = String::new();
    let mut t = 1_700_000_000.0;
    for i in 0..50 {
        let (frac, dt) = if i < 10 { (0.0, 30.0) } else { (0.9, 5.0) };
        s.push_str(&format!(
            "{{\"kind\":\"sample\",\"t\":{t},\"job_id\":\"1\",\"cpu_frac\":{frac}}}\n"
        ));
        t += dt;
    }
    assert!(has(&flags_of(&s, &[]), "idle_cpu"));
}

#[test]
fn single_threaded_needs_more_cpus_than_its_minimum() {
    assert!(
        !has(&flags_of(&single(2, 1000.0), &[]), "single_threaded"),
        "2 CPUs is not more than 2"
    );
}

#[test]
fn catastrophe_needs_the_drop_to_last() {
    // Dies at 97 %: the later segment is shorter than max(60 s, 10 %).
    assert!(!has(&flags_of(&dies(0.97, 0.0), &[]), "catastrophe"));
}

/// A healthy job with noise around a steady level raises nothing.
#[test]
fn noisy_healthy_job_raises_no_flag() {
    let mut r = Rng(42);
    let mut s = job(
        "\"state\":\"COMPLETED\",\"req_mem_mb\":8000,\"max_rss_mb\":3300,\"alloc_cpus\":16,\"nnodes\":1,\"elapsed_s\":15000,\"total_cpu_s\":180000",
    );
    for i in 0..500 {
        let t = 1_700_000_000.0 + i as f64 * 30.0;
        let cores = 12.0 + 3.0 * r.sym();
        let rss = 3000.0 + 200.0 * r.sym();
        s.push_str(&format!(
            "{{\"kind\":\"sample\",\"t\":{t},\"job_id\":\"1\",\"cpu_cores\":{cores},\"cpu_frac\":{},\"rss_mb\":{rss},\
\"read_mbps\":{},\"write_mbps\":1,\"lustre_read_mbps\":{},\"lustre_write_mbps\":0,\"lustre_meta_ops\":{},\
\"cpi\":{},\"cache_miss_rate\":{},\"numa_miss_rate\":{}}}\n",
            cores / 16.0,
            5.0 + 4.0 * r.sym(),
            10.0 + 5.0 * r.sym(),
            5.0 + r.sym(),
            0.8 + 0.1 * r.sym(),
            0.1 + 0.05 * r.sym(),
            0.05 + 0.02 * r.sym(),
        ));
    }
    s.push_str(
        "{\"kind\":\"summary\",\"job_id\":\"1\",\"nodes\":[\"n1\"],\"node_cpu_cv\":0.0,\"peak_rss_mb\":3200}\n",
    );
    let out = flags_of(&s, &[]);
    assert_eq!(raised(&out), Vec::<String>::new(), "{out}");
    // Everything was evaluated: the summary lists nothing.
    let sum: Value = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "summary")
        .unwrap();
    assert_eq!(sum["not_evaluated"], serde_json::json!([]), "{sum}");
}

/// One job with every field any rule reads: a job record, a meta, 20
/// samples and a job-wide summary.
fn complete_job() -> Vec<Value> {
    use serde_json::json;
    let mut recs = vec![
        json!({"kind": "job", "job_id": "1", "job_id_raw": "1", "state": "COMPLETED",
            "req_mem_mb": 8000, "max_rss_mb": 3300, "alloc_cpus": 16, "nnodes": 2,
            "elapsed_s": 1000, "total_cpu_s": 12000, "alloc_gpus": 1, "gpu_util": 60,
            "gpu_mem_max_mb": 30000}),
        json!({"kind": "meta", "job_id": "1", "host": "a", "req_cpus": 16, "req_mem_mb": 8000}),
    ];
    for i in 0..20 {
        recs.push(
            json!({"kind": "sample", "job_id": "1", "t": 1_700_000_000 + 10 * i,
            "cpu_frac": 0.7, "cpu_cores": 11.2, "rss_mb": 3000 + i, "read_mbps": 2,
            "write_mbps": 1, "lustre_read_mbps": 3, "lustre_write_mbps": 0,
            "lustre_meta_ops": 5, "cpi": 0.8, "cache_miss_rate": 0.1, "numa_miss_rate": 0.05,
            "gpu_util": 60, "gpu_mem_mb": 30000, "gpu_mem_total_mb": 81920}),
        );
    }
    recs.push(
        json!({"kind": "summary", "job_id": "1", "peak_rss_mb": 3019, "req_mem_mb": 8000,
        "req_cpus": 16, "cpu_s": 12000, "duration_s": 1000, "node_cpu_cv": 0.1,
        "nodes": ["a", "b"], "missing_nodes": [], "lustre_meta_ops": 5, "cpi": 0.8,
        "cache_miss_rate": 0.1, "numa_miss_rate": 0.05, "gpus": [{"gpu_index": 0,
        "peak_util": 70, "peak_mem_mb": 30000, "mem_total_mb": 81920, "max_procs": 1}]}),
    );
    recs
}

/// The `not_evaluated` of the job-wide summary in `output`.
fn not_evaluated(output: &str) -> Vec<String> {
    let sum: Value = output
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "summary")
        .unwrap();
    serde_json::from_value(sum["not_evaluated"].clone()).unwrap()
}

/// A rule's declared inputs are what it needs: without any field of one
/// of its groups it is listed in `not_evaluated`; with all there, nothing is.
#[test]
fn a_rule_missing_a_group_of_its_inputs_is_not_evaluated() {
    let text = |recs: &[Value]| recs.iter().map(|r| format!("{r}\n")).collect::<String>();
    let all = complete_job();
    assert_eq!(
        not_evaluated(&flags_of(&text(&all), &[])),
        Vec::<String>::new()
    );
    for rule in RULES {
        for group in rule.inputs {
            let mut recs = all.clone();
            for r in &mut recs {
                let kind = r["kind"].as_str().unwrap().to_owned();
                let m = r.as_object_mut().unwrap();
                for (k, field) in group.iter().filter_map(|i| i.split_once('.')) {
                    if k == kind {
                        m.remove(field);
                    }
                }
            }
            let ne = not_evaluated(&flags_of(&text(&recs), &[]));
            assert!(
                ne.iter().any(|f| f == rule.flag),
                "{} is evaluated without any of {group:?}",
                rule.flag
            );
        }
    }
}

#[test]
fn an_array_task_groups_with_its_samples_by_raw_id() {
    // sacct names the task 14_3; its probe files carry SLURM_JOB_ID, the raw id 14.
    let j = "{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"14_3\",\"job_id_raw\":\"14\",\"is_final\":true,\"state\":\"OUT_OF_MEMORY\"}\n";
    let s = "{\"kind\":\"summary\",\"job_id\":\"14\",\"peak_rss_mb\":5.0}\n";
    let out = flags_of(&format!("{j}{s}"), &[]);
    let flags: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "flag")
        .collect();
    assert_eq!(flags.len(), 1, "{out}");
    assert_eq!(flags[0]["job_id"], "14");
    assert_eq!(
        out.lines().filter(|l| l.contains("\"summary\"")).count(),
        1,
        "{out}"
    );
}

#[test]
fn lines_pass_through_and_flags_follow_each_job() {
    let a = job("\"state\":\"OUT_OF_MEMORY\"");
    let b = a
        .replace("\"job_id\":\"1\"", "\"job_id\":\"2\"")
        .replace("\"job_id_raw\":\"1\"", "\"job_id_raw\":\"2\"");
    let other = "{\"kind\":\"rec\",\"job_id\":\"2\",\"mem_mb\":5}\n";
    let input = format!("{a}{b}{other}");
    let out = flags_of(&input, &[]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // job 1, its summary, its flag; job 2, the rec, its summary, its flag.
    let kinds: Vec<(&str, &str)> = lines
        .iter()
        .map(|v| (v["kind"].as_str().unwrap(), v["job_id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("job", "1"),
            ("summary", "1"),
            ("flag", "1"),
            ("job", "2"),
            ("rec", "2"),
            ("summary", "2"),
            ("flag", "2")
        ]
    );
    // Pass-through lines are byte for byte the input's.
    assert!(out.starts_with(a.as_str()));
    assert!(out.contains(other));
    assert!(lines[1]["not_evaluated"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "idle_cpu"));
    let flag = &lines[2];
    assert_eq!(flag["category"], "misuse");
    assert!(flag["reason"].as_str().unwrap().contains("OUT_OF_MEMORY"));
}

#[test]
fn oom_killed_on_several_nodes_names_the_node_that_ran_out() {
    let summary = concat!(
        r#"{"kind":"summary","job_id":"1","nodes":["a","b","c"],"#,
        r#""peak_rss_mb_by_node":{"a":120.0,"b":395.5,"c":4.0}}"#,
        "\n"
    );
    let input = format!(
        "{}{summary}",
        job("\"state\":\"OUT_OF_MEMORY\",\"nnodes\":3")
    );
    let out = flags_of(&input, &[]);
    let flag: Value = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["flag"] == "oom_killed")
        .unwrap_or_else(|| panic!("{out}"));
    let reason = flag["reason"].as_str().unwrap();
    assert!(reason.contains("on node b (peak 396 MiB"), "{reason}");
    assert!(reason.contains("at most 120 MiB"), "{reason}");
    // One node: the reason names none.
    let one = flags_of(&job("\"state\":\"OUT_OF_MEMORY\""), &[]);
    assert!(!one.contains("on node"), "{one}");
    // A dump of job records with the summaries in a file of their own (the
    // reflag of hpc-harvest): the same node is named.
    let dir = tempfile::tempdir().unwrap();
    let sums = dir.path().join("summaries.ndjson");
    let per_node = r#"{"kind":"summary","job_id":"1","host":"a","peak_rss_mb":1.0}"#;
    std::fs::write(&sums, format!("{per_node}\n{summary}")).unwrap();
    let jobs = dir.path().join("jobs.ndjson");
    std::fs::write(&jobs, job("\"state\":\"OUT_OF_MEMORY\",\"nnodes\":3")).unwrap();
    let with_summaries = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hpc-flags"))
            .arg("--summaries")
            .arg(&sums)
            .arg(&jobs)
            .output()
            .unwrap()
    };
    let o = with_summaries();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("on node b (peak 396 MiB"), "{text}");
    // A job id written as a number, as in the job records, is the same id.
    std::fs::write(&sums, summary.replace(r#""job_id":"1""#, r#""job_id":1"#)).unwrap();
    let o = with_summaries();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("on node b (peak 396 MiB"), "{text}");
    // A line of that file that is not a summary is rejected by its line.
    std::fs::write(
        &sums,
        format!("{summary}{{\"kind\":\"job\",\"job_id\":\"2\"}}\n"),
    )
    .unwrap();
    let o = with_summaries();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("line 2") && err.contains("not a summary"),
        "{err}"
    );
}

/// A spike between two samples: node a has the higher sampled RSS peak,
/// node b the kernel's high-water mark at the limit. b ran out. Two nodes
/// near the limit (within 2 %) are told apart by their sampled peaks.
#[test]
fn oom_killed_names_the_node_by_its_high_water_mark() {
    let reason_of = |by_node: &str| {
        let summary = format!(
            "{{\"kind\":\"summary\",\"job_id\":\"1\",\"nodes\":[\"a\",\"b\",\"c\"],{by_node}}}\n"
        );
        let input = format!(
            "{}{summary}",
            job("\"state\":\"OUT_OF_MEMORY\",\"nnodes\":3")
        );
        let out = flags_of(&input, &[]);
        out.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["flag"] == "oom_killed")
            .unwrap_or_else(|| panic!("{out}"))["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let peaks = r#""peak_rss_mb_by_node":{"a":700.0,"b":610.0,"c":4.0}"#;
    let spike = reason_of(&format!(
        r#"{peaks},"hwm_mb_by_node":{{"a":720.0,"b":1024.0,"c":5.0}}"#
    ));
    assert!(
        spike.contains("on node b (high-water mark 1024 MiB, peak RSS 610 MiB"),
        "{spike}"
    );
    assert!(spike.contains("at most 720 MiB"), "{spike}");
    // Page cache brought a's high-water mark near the limit too: the
    // sampled peaks decide.
    let near = reason_of(&format!(
        r#"{peaks},"hwm_mb_by_node":{{"a":1010.0,"b":1024.0,"c":5.0}}"#
    ));
    assert!(
        near.contains("on node a (high-water mark 1010 MiB"),
        "{near}"
    );
    assert!(
        near.contains("another node's high-water mark 1024 MiB, within 2 %"),
        "{near}"
    );
    // Without sampled peaks, the higher mark of a near-tie.
    let marks = reason_of(r#""hwm_mb_by_node":{"a":1024.0,"b":1010.0}"#);
    assert!(
        marks.contains("on node a (high-water mark 1024 MiB;"),
        "{marks}"
    );
    // A node with a peak but no mark: the sampled peaks decide.
    let partial = reason_of(&format!(
        r#"{peaks},"hwm_mb_by_node":{{"b":1024.0,"c":5.0}}"#
    ));
    assert!(partial.contains("on node a (peak 700 MiB"), "{partial}");
}

#[test]
fn a_record_with_odd_field_types_still_passes_through() {
    let odd = "{\"kind\":\"rec\",\"job_id\":\"1\",\"cpu_cores\":\"four\"}\n";
    let out = flags_of(&format!("{}{odd}", job("\"state\":\"OUT_OF_MEMORY\"")), &[]);
    assert!(out.contains(odd), "{out}");
    assert!(has(&out, "oom_killed"));
}

#[test]
fn a_summary_gets_not_evaluated_instead_of_the_original() {
    let input = "{\"kind\":\"summary\",\"job_id\":\"5\",\"peak_rss_mb\":10,\"req_mem_mb\":100}\n";
    let out = flags_of(input, &[]);
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(out.starts_with("{\"kind\":\"summary\""), "{out}");
    assert_eq!(first["peak_rss_mb"], 10);
    let ne = first["not_evaluated"].as_array().unwrap();
    assert!(ne.iter().any(|v| v == "oom_killed"));
    assert!(!ne.iter().any(|v| v == "mem_overrequest"));
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("\"kind\":\"summary\""))
            .count(),
        1
    );
    assert!(has(&out, "mem_overrequest"));
}

#[test]
fn empty_input_gives_empty_output() {
    let (code, out, err) = TOOL.cli(&[], "");
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
}

#[test]
fn malformed_lines_are_reported_with_their_number() {
    let input = format!(
        "{}not json\n{{\"job_id\":\"1\"}}\n",
        job("\"state\":\"COMPLETED\"")
    );
    let (code, out, err) = TOOL.cli(&[], &input);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 2: not a record"), "{err}");
    assert!(err.contains("line 3: no \"kind\""), "{err}");
    assert!(
        out.starts_with("{\"kind\":\"job\""),
        "good lines still go through: {out}"
    );
}

#[test]
fn a_truncated_last_line_is_only_a_warning() {
    let input = format!(
        "{}{{\"kind\":\"sample\",\"t\":1",
        job("\"state\":\"COMPLETED\"")
    );
    let (code, _, err) = TOOL.cli(&[], &input);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn bad_thresholds_are_usage_errors() {
    let (code, _, err) = TOOL.cli(&["--set", "nope=1"], "");
    assert_eq!(code, 2);
    assert!(err.contains("unknown threshold 'nope'"), "{err}");
    let (code, _, _) = TOOL.cli(&["--set", "high_cpi=abc"], "");
    assert_eq!(code, 2);
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("flags.conf");
    std::fs::write(&conf, "# thresholds\nhigh_cpi = 0.5\n").unwrap();
    let input = mean_of("cpi", 0.7);
    let (code, out, _) = TOOL.cli(&["--config", conf.to_str().unwrap()], &input);
    assert_eq!(code, 0);
    assert!(has(&out, "high_cpi"));
    std::fs::write(&conf, "high_cpi = 0.5\nwhat\n").unwrap();
    let (code, _, err) = TOOL.cli(&["--config", conf.to_str().unwrap()], "");
    assert_eq!(code, 2);
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn help_lists_the_options() {
    let (code, out, _) = TOOL.cli(&["--help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("--set") && out.contains("--config"), "{out}");
}

#[test]
fn every_long_flag_in_help_is_in_the_man_page() {
    let (_, help, _) = TOOL.cli(&["--help"], "");
    let man = TOOL.man_page().replace("\\-", "-");
    assert!(TOOL.assert_help_in_man(&help).len() >= 3);
    for name in hpc_flags::thresholds::Param::ALL.iter().map(|p| p.name()) {
        assert!(
            man.contains(&name.replace('_', "\\_")) || man.contains(name),
            "threshold {name} not in the man page"
        );
    }
}

/// The roff source of the man page's section `name`, up to the next `.SH`.
fn man_section(man: &str, name: &str) -> String {
    let start = man
        .find(&format!("\n.SH {name}\n"))
        .unwrap_or_else(|| panic!("no section {name}"));
    let rest = &man[start + 1..];
    let end = rest[1..].find("\n.SH ").map_or(rest.len(), |e| e + 1);
    rest[..end].to_owned()
}

/// Roff source with its inline font changes (`\fB`, `\fI`, `\fR`) taken
/// out, so that the words stand alone.
fn unfonted(roff: &str) -> String {
    roff.replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
}

/// Whether `text` holds `word` on its own (not inside a longer name).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        !text[..i].ends_with(name_char) && !text[i + word.len()..].starts_with(name_char)
    })
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The defaults `text` shows for threshold `name`: each `name (value)`.
fn shown_defaults(text: &str, name: &str) -> Vec<f64> {
    text.match_indices(name)
        .filter(|(i, _)| !text[..*i].ends_with(name_char))
        .filter_map(|(i, _)| {
            let rest = text[i + name.len()..].trim_start().strip_prefix('(')?;
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
            rest[..end].parse().ok()
        })
        .collect()
}

/// man/hpc-flags.1 lists every rule of the table, in order, with its
/// category, each of its thresholds with the default, and the fields it
/// reads; and nothing else.
#[test]
fn the_man_page_lists_every_flag_with_its_category_and_thresholds() {
    let man = TOOL.man_page();
    let flags = man_section(&man, "FLAGS");
    // Each entry: `.TP`, `.BR <flag> " (<category>)"` and its lines, joined.
    let entries: Vec<(&str, String)> = flags
        .split("\n.TP\n")
        .skip(1)
        .map(|e| {
            let (head, body) = e.split_once('\n').unwrap_or((e, ""));
            (head, unfonted(body).replace('\n', " "))
        })
        .collect();
    let heads: Vec<&str> = entries.iter().map(|(h, _)| *h).collect();
    let want: Vec<String> = RULES
        .iter()
        .map(|r| format!(".BR {} \" ({})\"", r.flag, r.category.name()))
        .collect();
    assert_eq!(heads, want, "the FLAGS entries are the table's rules");
    let output = unfonted(&man_section(&man, "OUTPUT"));
    let input = unfonted(&man_section(&man, "INPUT"));
    for (rule, (_, body)) in RULES.iter().zip(&entries) {
        assert!(has_word(&output, rule.category.name()), "{}", rule.flag);
        for p in rule.params {
            let shown = shown_defaults(body, p.name());
            assert!(
                shown.contains(&p.default_value()),
                "{}: the entry shows {} with {shown:?}, not its default {}",
                rule.flag,
                p.name(),
                p.default_value()
            );
        }
        for field in rule.inputs.iter().flat_map(|g| g.iter()) {
            let (kind, field) = field.split_once('.').unwrap();
            let fields = input
                .split(&format!(".BR {kind} :"))
                .nth(1)
                .and_then(|rest| rest.split(".BR ").next())
                .unwrap_or_else(|| panic!("INPUT lists no {kind} fields"));
            assert!(has_word(fields, field), "INPUT lacks {kind} {field}");
        }
    }
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let first = TOOL.closed_pipe(&[], |mut sin| {
        let line = job("\"state\":\"COMPLETED\"");
        for i in 0..100_000 {
            let l = line.replace("\"job_id\":\"1\"", &format!("\"job_id\":\"{i}\""));
            if sin.write_all(l.as_bytes()).is_err() {
                break;
            }
        }
    });
    assert!(first.starts_with("{\"kind\":\"job\""));
}

/// bin-wrappers/hpc-finalize end to end over a temporary spool, with the
/// real hpc-merge and hpc-flags (hpc-merge is found beside hpc-flags in the
/// target folder, where `cargo test --workspace` builds it; `cargo test -p
/// hpc-flags` does not, so the test is run on request, as tests/run.sh
/// does, and fails when hpc-merge is missing).
#[test]
#[ignore = "needs hpc-merge built beside hpc-flags: cargo test --workspace -- --ignored (tests/run.sh runs it)"]
fn finalize_writes_the_incoming_file_and_the_archive() {
    let bin_dir = Path::new(TOOL.bin()).parent().unwrap();
    assert!(
        bin_dir.join("hpc-merge").exists(),
        "hpc-merge is not built in {} (cargo build -p hpc-merge, or cargo test --workspace)",
        bin_dir.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bin-wrappers/hpc-finalize");
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    std::fs::create_dir_all(spool.join("42")).unwrap();
    for (h, cores) in [("n1", 4.0), ("n2", 0.0)] {
        let mut s = format!(
            "{{\"kind\":\"meta\",\"job_id\":\"42\",\"host\":\"{h}\",\"start\":1700000000,\"interval_s\":10,\"req_cpus\":8,\"req_mem_mb\":4000,\"nnodes\":2,\"probe_version\":\"t\"}}\n"
        );
        for i in 1..=30 {
            let t = 1_700_000_000 + i * 10;
            s.push_str(&format!(
                "{{\"kind\":\"sample\",\"t\":{t},\"host\":\"{h}\",\"job_id\":\"42\",\"rss_mb\":100,\"cpu_cores\":{cores}}}\n"
            ));
        }
        std::fs::write(spool.join("42").join(format!("{h}.ndjson")), s).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let finalize = || {
        Command::new("sh")
            .arg(&script)
            .args(["--no-sacct", "42"])
            .env("PATH", &path)
            .env("HPC_SIZER_SPOOL", &spool)
            .output()
            .unwrap()
    };
    let out = finalize();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let incoming = spool.join("incoming/42.ndjson");
    let first = std::fs::read_to_string(&incoming).unwrap();
    let recs: Vec<Value> = first
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        recs.iter().all(|r| r["kind"] != "sample"),
        "no samples in the store file"
    );
    let job = recs
        .iter()
        .find(|r| r["kind"] == "summary" && r.get("host").is_none())
        .unwrap();
    let series = spool.join("archive/42.series.ndjson.gz");
    assert_eq!(job["series"], series.to_str().unwrap());
    assert!(job["not_evaluated"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "oom_killed"));
    assert!(has(&first, "mem_overrequest"), "{first}");
    assert_eq!(job["idle_nodes"], serde_json::json!(["n2"]));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&incoming).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The archive holds the merged samples (no host), then each node's own
    // (two nodes: hpc plot draws a line per node from them).
    let gz = Command::new("gzip")
        .arg("-dc")
        .arg(&series)
        .output()
        .unwrap();
    let text = String::from_utf8(gz.stdout).unwrap();
    assert!(text.lines().all(|l| l.starts_with("{\"kind\":\"sample\"")));
    let hosts: Vec<Option<String>> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["host"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(hosts.len(), 90);
    assert!(hosts[..30].iter().all(Option::is_none), "{hosts:?}");
    for h in ["n1", "n2"] {
        assert_eq!(hosts.iter().filter(|x| x.as_deref() == Some(h)).count(), 30);
    }
    // Twice gives the same files, and no temporary is left behind.
    let gz1 = std::fs::read(&series).unwrap();
    assert!(finalize().status.success());
    assert_eq!(std::fs::read_to_string(&incoming).unwrap(), first);
    assert_eq!(std::fs::read(&series).unwrap(), gz1);
    assert_eq!(
        std::fs::read_dir(spool.join("incoming")).unwrap().count(),
        1
    );
    let leftovers = std::fs::read_dir(&spool)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(leftovers, 0);
    // A job without node files fails.
    let out = Command::new("sh")
        .arg(&script)
        .args(["--no-sacct", "43"])
        .env("PATH", &path)
        .env("HPC_SIZER_SPOOL", &spool)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        Command::new("sh")
            .arg(&script)
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn a_bad_config_file_is_a_usage_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("flags\n.conf");
    let shown = hpc_core::paths::shown(&conf);
    let c = conf.to_str().unwrap();
    // Missing, then a folder: unreadable.
    let (code, _, err) = TOOL.cli(&["--config", c], "");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(&format!("hpc-flags: --config {shown}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let d = dir.path().to_str().unwrap();
    let (code, _, err) = TOOL.cli(&["--config", d], "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("--config {d}: ")), "{err}");
    // Malformed lines: each names the file and the line.
    for (text, want) in [
        (
            &b"high_cpi = 0.5\nwhat\n"[..],
            "line 2: 'what': expected name=value",
        ),
        (b"# ok\nnope = 1\n", "line 2: unknown threshold 'nope'"),
        (
            b"high_cpi = -1\n",
            "line 1: threshold high_cpi: '-1' is not a number >= 0",
        ),
        (b"\n\nhigh_cpi = \xff\n", "line 3: not valid UTF-8"),
    ] {
        std::fs::write(&conf, text).unwrap();
        let (code, out, err) = TOOL.cli(&["--config", c], &mean_of("cpi", 0.7));
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.starts_with(&format!("hpc-flags: --config {shown}: {want}")),
            "{err}"
        );
    }
}

/// Runs the binary with stdin from `input`, stdout to `stdout` and stderr
/// to `stderr` (`/dev/full` for a stream that cannot be written).
fn run_to(args: &[&str], input: &str, stdout: &str, stderr: &str) -> Option<i32> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.ndjson");
    std::fs::write(&path, input).unwrap();
    let input = std::fs::File::open(&path).unwrap();
    status_to(&mut TOOL.command(args), input, stdout, stderr)
}

#[test]
fn a_stderr_that_cannot_be_written_changes_no_exit_status() {
    let good = job("\"state\":\"COMPLETED\"");
    let code = |args: &[&str], input: &str| run_to(args, input, "/dev/null", "/dev/full");
    assert_eq!(code(&[], &good), Some(0));
    // A rejected line, and a truncated last line (a warning).
    assert_eq!(code(&[], &format!("{good}not json\n")), Some(1));
    assert_eq!(code(&[], &format!("{good}{{\"kind\":\"sam")), Some(0));
    assert_eq!(code(&["--set", "nope=1"], &good), Some(2));
    assert_eq!(code(&["/no/such/file"], &good), Some(1));
}

#[test]
fn help_that_cannot_be_written_fails() {
    assert_eq!(run_to(&["--help"], "", "/dev/full", "/dev/null"), Some(1));
    assert_eq!(run_to(&["--help"], "", "/dev/null", "/dev/null"), Some(0));
}

#[test]
fn file_names_in_messages_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("in\n\x1b[31m.ndjson");
    let name = odd.to_str().unwrap();
    let (code, _, err) = TOOL.cli(&[name], "");
    assert_eq!(code, 1);
    assert!(err.contains("in\\n\\u{1b}[31m.ndjson"), "{err}");
    assert!(!err.contains('\x1b'), "{err}");
    std::fs::write(&odd, "not json\n").unwrap();
    let (code, _, err) = TOOL.cli(&[name], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("in\\n\\u{1b}[31m.ndjson: line 1: not a record"),
        "{err}"
    );
}

#[test]
fn values_near_the_limit_of_a_number_raise_no_flag_of_inf() {
    // A cpi of 1e308 in each sample: the mean overflowed and high_cpi was
    // raised with the value null and "mean cycles per instruction inf";
    // node_cpu_cv's reason said "inf" for 1e308.
    let mut input = String::from(
        r#"{"kind":"summary","job_id":"8","duration_s":0,"req_cpus":4,"cpu_s":0,"nodes":["a","b"],"missing_nodes":[],"node_cpu_cv":1e308}"#,
    );
    input.push('\n');
    for i in 0..5 {
        input.push_str(&format!(
            r#"{{"kind":"sample","job_id":"8","t":{},"cpu_cores":1.0,"rss_mb":10.0,"cpi":1e308}}"#,
            1_795_800_000 + i
        ));
        input.push('\n');
    }
    let out = flags_of(&input, &[]);
    for l in out.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        if v["kind"] == "flag" {
            assert!(v["value"].is_number(), "{l}");
            assert!(!v["reason"].as_str().unwrap().contains("inf"), "{l}");
        }
    }
    assert!(!raised(&out).contains(&"high_cpi".to_string()), "{out}");
    assert!(
        out.contains("\"high_cpi\""),
        "listed as not evaluated: {out}"
    );
}

/// What a job record cannot tell is not judged: the usage of a job still
/// running (sacct shows its finished steps' alone), the sampled figures of
/// a job shorter than SLURM's sampling, a MaxRSS of 0; and memory is the
/// job's over all its tasks (mem_eff), as hpc-ingest counts it.
#[test]
fn what_a_job_record_cannot_tell_is_not_judged() {
    let over = |extra: &str| {
        job(&format!(
            "\"state\":\"COMPLETED\",\"req_mem_mb\":16000,\"max_rss_mb\":1900,\"alloc_cpus\":8,\"elapsed_s\":3600,\"total_cpu_s\":100{extra}"
        ))
    };
    let out = flags_of(&over(""), &[]);
    assert!(
        has(&out, "mem_overrequest") && has(&out, "single_threaded"),
        "{out}"
    );
    // 8 tasks of 1900 MiB each use 95 % of the request (reportseff's job
    // 131042): not over-requested.
    let out = flags_of(&over(",\"mem_eff\":95.08"), &[]);
    assert!(!has(&out, "mem_overrequest"), "{out}");
    let running = over("")
        .replace("\"is_final\":true", "\"is_final\":false")
        .replace("COMPLETED", "RUNNING");
    let out = flags_of(&running, &[]);
    assert!(raised(&out).is_empty(), "a running job: {out}");
    let short = over("").replace("\"elapsed_s\":3600", "\"elapsed_s\":12");
    assert!(!has(&flags_of(&short, &[]), "mem_overrequest"));
    let zero = over("").replace("\"max_rss_mb\":1900", "\"max_rss_mb\":0");
    assert!(!has(&flags_of(&zero, &[]), "mem_overrequest"));
}

/// A job killed at its time limit was flagged for nothing else (the
/// real 22.05 job 18 got only mem_overrequest).
#[test]
fn a_job_killed_at_its_time_limit_is_flagged() {
    let out = flags_of(&job("\"state\":\"TIMEOUT\",\"elapsed_s\":3600"), &[]);
    assert!(has(&out, "timed_out"), "{out}");
    assert!(!has(
        &flags_of(&job("\"state\":\"COMPLETED\""), &[]),
        "timed_out"
    ));
}
