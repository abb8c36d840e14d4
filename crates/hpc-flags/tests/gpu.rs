//! The GPU flags (issue 13): gpu_idle, gpu_unused and gpu_mem_low, on
//! hpc-merge's output (the probe's recorded NVML readings merged) and on
//! sacct job records alone.

use hpc_flags::thresholds::Thresholds;
use hpc_flags::Opts;
use hpc_testkit::Tool;
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-flags"));

fn flags(input: &str, sets: &[&str]) -> Vec<Value> {
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
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "flag")
        .collect()
}

fn flag<'a>(out: &'a [Value], name: &str) -> Option<&'a Value> {
    out.iter().find(|f| f["flag"] == name)
}

/// A merged job: its series (gpu_util and memory per sample) and a
/// job-wide summary with hpc-merge's per-GPU list.
fn merged(utils: &[f64], gpus: &str) -> String {
    let mut s = String::new();
    for (i, u) in utils.iter().enumerate() {
        s += &format!(
            "{{\"kind\":\"sample\",\"t\":{},\"job_id\":\"7\",\"gpu_util\":{u},\"gpu_mem_mb\":3000,\"gpu_mem_total_mb\":163840}}\n",
            1000 + 10 * i
        );
    }
    s + &format!("{{\"kind\":\"summary\",\"job_id\":\"7\",\"nodes\":[\"n1\"],\"gpus\":[{gpus}]}}\n")
}

const BUSY: &str = r#"{"host":"n1","gpu_index":0,"peak_util":92,"mean_util":88,"peak_mem_mb":30000,"mem_total_mb":81920,"max_procs":1}"#;
const UNTOUCHED: &str = r#"{"host":"n1","gpu_index":1,"peak_util":0,"mean_util":0,"peak_mem_mb":0,"mem_total_mb":81920,"max_procs":0}"#;

#[test]
fn two_gpus_one_never_touched_raise_gpu_unused_naming_it() {
    let out = flags(&merged(&[45.0; 10], &format!("{BUSY},{UNTOUCHED}")), &[]);
    let f = flag(&out, "gpu_unused").expect("gpu_unused");
    assert_eq!(f["value"], 0.0);
    assert_eq!(f["threshold"], 1.0);
    let why = f["reason"].as_str().unwrap();
    assert!(
        why.starts_with("1 of 2 GPUs never used") && why.ends_with("n1:1"),
        "{why}"
    );
    assert!(flag(&out, "gpu_idle").is_none(), "45 % is not idle");
    // Both GPUs busy: nothing.
    let busy2 = BUSY.replace("\"gpu_index\":0", "\"gpu_index\":1");
    let out = flags(&merged(&[90.0; 10], &format!("{BUSY},{busy2}")), &[]);
    assert!(flag(&out, "gpu_unused").is_none(), "{out:?}");
}

#[test]
fn a_gpu_with_a_job_process_at_0_percent_is_idle_not_unused() {
    let held = UNTOUCHED.replace("\"max_procs\":0", "\"max_procs\":1");
    let out = flags(&merged(&[0.0; 10], &held), &[]);
    assert!(flag(&out, "gpu_unused").is_none(), "{out:?}");
    let f = flag(&out, "gpu_idle").expect("gpu_idle");
    assert_eq!(
        (f["value"].as_f64(), f["threshold"].as_f64()),
        (Some(1.0), Some(0.5))
    );
}

#[test]
fn gpu_idle_follows_the_share_of_idle_time_and_its_thresholds() {
    let mut u = vec![2.0; 6];
    u.extend([80.0; 4]);
    let out = flags(&merged(&u, BUSY), &[]);
    assert!(flag(&out, "gpu_idle").is_some(), "60 % of the time idle");
    let out = flags(&merged(&u, BUSY), &["gpu_idle=0.7"]);
    assert!(flag(&out, "gpu_idle").is_none());
    let out = flags(&merged(&u, BUSY), &["gpu_idle_util=1"]);
    assert!(flag(&out, "gpu_idle").is_none());
}

#[test]
fn gpu_mem_low_compares_the_fullest_gpu_with_its_memory() {
    // 30000 of 81920 MiB: 36.6 %.
    let out = flags(&merged(&[90.0; 10], BUSY), &[]);
    assert!(flag(&out, "gpu_mem_low").is_none());
    let small = BUSY.replace("30000", "8000");
    let out = flags(&merged(&[90.0; 10], &small), &[]);
    let f = flag(&out, "gpu_mem_low").expect("gpu_mem_low");
    assert!(
        (f["value"].as_f64().unwrap() - 8000.0 / 81920.0).abs() < 1e-6,
        "{f}"
    );
    // Without a summary, the samples' memory over theirs: 3000 / 163840.
    let series_only: String = merged(&[90.0; 10], BUSY)
        .lines()
        .filter(|l| l.contains("\"sample\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let out = flags(&series_only, &[]);
    let f = flag(&out, "gpu_mem_low").expect("from samples");
    assert!(
        (f["value"].as_f64().unwrap() - 3000.0 / 163840.0).abs() < 1e-6,
        "{f}"
    );
}

fn sacct_job(fields: &str) -> String {
    format!("{{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"9\",\"job_id_raw\":\"9\",\"state\":\"COMPLETED\",\"is_final\":true,\"elapsed_s\":3600,\"alloc_gpus\":2,{fields}}}\n")
}

#[test]
fn from_sacct_alone_an_untouched_allocation_is_unused_and_idle() {
    let out = flags(&sacct_job("\"gpu_util\":0,\"gpu_mem_max_mb\":0"), &[]);
    assert!(flag(&out, "gpu_unused").is_some(), "{out:?}");
    assert!(flag(&out, "gpu_idle").is_some(), "{out:?}");
    // Used a little: idle, not unused.
    let out = flags(&sacct_job("\"gpu_util\":3,\"gpu_mem_max_mb\":900"), &[]);
    assert!(flag(&out, "gpu_unused").is_none(), "{out:?}");
    assert_eq!(flag(&out, "gpu_idle").unwrap()["value"], 3.0);
    // Busy.
    let out = flags(&sacct_job("\"gpu_util\":85,\"gpu_mem_max_mb\":30000"), &[]);
    assert!(flag(&out, "gpu_idle").is_none() && flag(&out, "gpu_unused").is_none());
}

#[test]
fn from_sacct_alone_gpu_mem_low_needs_the_card_size() {
    let job = sacct_job("\"gpu_util\":85,\"gpu_mem_max_mb\":3000");
    assert!(flag(&flags(&job, &[]), "gpu_mem_low").is_none());
    let out = flags(&job, &["gpu_mem_low_card_mb=81920"]);
    assert!(flag(&out, "gpu_mem_low").is_some(), "{out:?}");
}

#[test]
fn older_slurm_without_gpu_fields_leaves_the_gpu_flags_not_evaluated() {
    let (code, out, err) = TOOL.cli(&[], &sacct_job("\"total_cpu_s\":10"));
    assert_eq!(code, 0, "{err}");
    let sum: Value = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "summary")
        .unwrap();
    let ne = sum["not_evaluated"].as_array().unwrap();
    for f in ["gpu_idle", "gpu_unused", "gpu_mem_low"] {
        assert!(ne.iter().any(|v| v == f), "{f} in {ne:?}");
    }
}
