//! The probe's GPU readings on recorded NVML values (the fixture source,
//! `HPC_PROBE_GPU_FIXTURE`), and on a machine without the NVIDIA library.

use std::path::Path;
use std::process::{Child, Command, Output};

use hpc_testkit::{show, text, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-probe"));

fn bin() -> Command {
    let mut c = TOOL.command(&[]);
    for v in [
        "SLURM_JOB_ID",
        "SLURM_CPUS_ON_NODE",
        "SLURM_JOB_GPUS",
        "SLURM_STEP_GPUS",
        "CUDA_VISIBLE_DEVICES",
        "HPC_PROBE_GPU_FIXTURE",
    ] {
        c.env_remove(v);
    }
    c
}

fn sleeper() -> Child {
    Command::new("sleep").arg("30").spawn().expect("sleep")
}

/// The fixture `name` with the watched pid in place of `"PID"`, written to
/// a temporary file.
fn fixture(name: &str, pid: u32, dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gpu")
        .join(name);
    let text = std::fs::read_to_string(src)
        .unwrap()
        .replace("\"PID\"", &pid.to_string());
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn records(out: &Output) -> Vec<Value> {
    assert_eq!(out.status.code(), Some(0), "{}", show(out));
    hpc_testkit::records(&text(&out.stdout))
}

fn of_kind<'a>(recs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["kind"] == kind).collect()
}

fn probe_pid(pid: u32, envs: &[(&str, &str)]) -> Vec<Value> {
    let mut c = bin();
    c.args([
        "--pid",
        &pid.to_string(),
        "--samples",
        "5",
        "--interval",
        "0.05",
        "--no-perf",
    ]);
    for (k, v) in envs {
        c.env(k, v);
    }
    records(&c.output().unwrap())
}

#[test]
fn two_gpus_one_never_touched_are_both_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = sleeper();
    let f = fixture("two-gpus-one-untouched.ndjson", s.id(), dir.path());
    let recs = probe_pid(s.id(), &[("HPC_PROBE_GPU_FIXTURE", f.to_str().unwrap())]);
    let _ = s.kill();
    let _ = s.wait();
    let meta = &recs[0];
    assert_eq!(meta["gpu_source"], "fixture");
    let gpus = meta["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[1]["uuid"], "GPU-a93e61d2-47b0-4f5a-8c2d-6e1b3f9a7d40");
    assert_eq!(gpus[1]["name"], "NVIDIA A100-SXM4-80GB");
    assert_eq!(gpus[1]["mem_total_mb"], 81920.0);
    let samples = of_kind(&recs, "sample");
    let per_gpu = of_kind(&recs, "gpu");
    assert_eq!(samples.len(), 5);
    assert_eq!(per_gpu.len(), 10, "two GPU records after each sample");
    // The second sample: GPU 0 at 85 %, GPU 1 at 0 %.
    assert_eq!(samples[1]["gpu_util"], 42.5);
    assert_eq!(samples[1]["gpu_mem_mb"], 3000.0);
    assert_eq!(samples[1]["gpu_mem_total_mb"], 163840.0);
    assert_eq!(samples[1]["gpu_power_w"], 302.0);
    for g in per_gpu.iter().filter(|g| g["gpu_index"] == 1) {
        assert_eq!(g["gpu_util"], 0.0, "{g}");
        assert_eq!(g["gpu_procs"], 0, "{g}");
        assert_eq!(g["gpu_mem_mb"], 0.0, "{g}");
    }
    let busy: Vec<_> = per_gpu.iter().filter(|g| g["gpu_index"] == 0).collect();
    assert!(busy.iter().all(|g| g["gpu_procs"] == 1), "{busy:?}");
    assert_eq!(busy[1]["t"], samples[1]["t"]);
}

#[test]
fn slurm_job_gpus_picks_the_job_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = sleeper();
    let f = fixture("two-gpus-one-untouched.ndjson", s.id(), dir.path());
    let recs = probe_pid(
        s.id(),
        &[
            ("HPC_PROBE_GPU_FIXTURE", f.to_str().unwrap()),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_JOB_GPUS", "1"),
        ],
    );
    let _ = s.kill();
    let _ = s.wait();
    assert_eq!(recs[0]["gpus"].as_array().unwrap().len(), 1);
    assert!(of_kind(&recs, "gpu").iter().all(|g| g["gpu_index"] == 1));
    assert!(of_kind(&recs, "sample")
        .iter()
        .all(|s| s["gpu_util"] == 0.0));
}

#[test]
fn a_slurm_job_without_gpus_has_no_gpu_fields() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = sleeper();
    let f = fixture("idle.ndjson", s.id(), dir.path());
    let recs = probe_pid(
        s.id(),
        &[
            ("HPC_PROBE_GPU_FIXTURE", f.to_str().unwrap()),
            ("SLURM_JOB_ID", "78"),
        ],
    );
    let _ = s.kill();
    let _ = s.wait();
    assert_eq!(recs[0]["gpu_reason"], "the job has no GPU");
    assert!(of_kind(&recs, "gpu").is_empty());
    assert!(of_kind(&recs, "sample")
        .iter()
        .all(|s| s.get("gpu_util").is_none()));
}

#[test]
fn without_the_nvidia_library_no_gpu_field_and_exit_0() {
    let mut s = sleeper();
    let recs = probe_pid(s.id(), &[]);
    let _ = s.kill();
    let _ = s.wait();
    let meta = &recs[0];
    if meta["gpu_source"] == "nvml" {
        // A machine with NVIDIA's library and GPUs: the fields are there.
        assert!(of_kind(&recs, "sample")[0]
            .get("gpu_mem_total_mb")
            .is_some());
        return;
    }
    let why = meta["gpu_reason"].as_str().unwrap();
    assert!(
        why.starts_with("NVML not available") || why.starts_with("no GPU"),
        "{why}"
    );
    assert!(of_kind(&recs, "gpu").is_empty());
    for s in of_kind(&recs, "sample") {
        for k in ["gpu_util", "gpu_mem_mb", "gpu_mem_total_mb", "gpu_power_w"] {
            assert!(s.get(k).is_none(), "{k} in {s}");
        }
    }
}

#[test]
fn a_bad_fixture_is_said_in_the_meta_and_the_probe_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.ndjson");
    std::fs::write(&f, "{\"index\":0}\nnot json\n").unwrap();
    let mut s = sleeper();
    let recs = probe_pid(s.id(), &[("HPC_PROBE_GPU_FIXTURE", f.to_str().unwrap())]);
    let _ = s.kill();
    let _ = s.wait();
    let why = recs[0]["gpu_reason"].as_str().unwrap();
    assert!(
        why.ends_with("line 2: expected ident at line 1 column 2"),
        "{why}"
    );
    assert_eq!(of_kind(&recs, "sample").len(), 5);
}
