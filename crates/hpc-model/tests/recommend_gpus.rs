//! hpc-model recommend: `gpus` follows the GPUs earlier jobs actually used
//! (issue 13), from hpc-merge's per-GPU summary or sacct's GPU memory.

use std::io::Write;

use hpc_core::advice::{Rec, Tier};
use hpc_testkit::Tool;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));

/// Runs the binary with no store (HPC_SIZER_DB names none) and an empty
/// stdin; returns (code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    TOOL.cli_without_db(args, "")
}

/// A script of tool `train` asking 4 GPUs.
const ANALYSIS: &str = r#"{"kind":"analysis","user":"ana","script":"t.sbatch","script_sha256":"00","request":{"mem_mb":65536,"cpus":8,"time_s":7200,"gpus":4},"tool":"train","tools":["train"],"inputs":[],"input_mb":0}"#;

/// An earlier `train` job on 4 GPUs; `summary_gpus`: hpc-merge's list, or
/// none (sacct only, with `gpu_mem_max_mb`).
fn job(id: usize, summary_gpus: Option<&str>, gpu_mem: f64) -> String {
    let mut s = format!(
        concat!(
            r#"{{"kind":"job","cluster":"c","job_id":"{id}","job_id_raw":"{id}","user":"ana","state":"COMPLETED","end":"2026-01-01T00:00:{id:02}Z","#,
            r#""elapsed_s":3600,"alloc_cpus":8,"alloc_gpus":4,"gpu_mem_max_mb":{mem},"gpu_util":40,"req_mem_mb":65536,"max_rss_mb":9000,"total_cpu_s":20000,"is_final":true}}"#,
            "\n",
            r#"{{"kind":"analysis","job_id":"{id}","script":"t.sbatch","script_sha256":"00","request":{{}},"tool":"train"}}"#,
            "\n"
        ),
        id = id,
        mem = gpu_mem
    );
    if let Some(g) = summary_gpus {
        s += &format!(r#"{{"kind":"summary","job_id":"{id}","peak_rss_mb":9000,"gpus":[{g}]}}"#);
        s.push('\n');
    }
    s
}

fn gpu(i: u32, peak_util: f64, procs: u32) -> String {
    format!(r#"{{"gpu_index":{i},"peak_util":{peak_util},"max_procs":{procs}}}"#)
}

fn recommend(history: &str, format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.ndjson");
    let h = dir.path().join("h.ndjson");
    std::fs::write(&a, format!("{ANALYSIS}\n")).unwrap();
    let mut f = std::fs::File::create(&h).unwrap();
    f.write_all(history.as_bytes()).unwrap();
    let (code, out, err) = cli(&[
        "recommend",
        a.to_str().unwrap(),
        "--history",
        h.to_str().unwrap(),
        "--format",
        format,
    ]);
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn gpus_follow_the_gpus_earlier_jobs_used() {
    // Each job held 4 GPUs and used 2 (one more ran a process at 0 %).
    let two = [
        gpu(0, 90.0, 1),
        gpu(1, 85.0, 1),
        gpu(2, 0.0, 0),
        gpu(3, 0.0, 0),
    ]
    .join(",");
    let hist: String = (0..6).map(|i| job(i, Some(&two), 30000.0)).collect();
    let rec: Rec = hpc_core::record::from_line(recommend(&hist, "ndjson").trim()).unwrap();
    assert_eq!(rec.gpus, Some(2));
    let b = &rec.basis["gpus"];
    assert_eq!((b.tier, b.n), (Tier::History, Some(6)));
    let sb = recommend(&hist, "sbatch");
    assert!(sb.contains("#SBATCH --gpus=2"), "{sb}");
}

#[test]
fn jobs_that_never_touched_their_gpus_advise_none() {
    // sacct alone: no GPU memory ever used.
    let hist: String = (0..5).map(|i| job(i, None, 0.0)).collect();
    let rec: Rec = hpc_core::record::from_line(recommend(&hist, "ndjson").trim()).unwrap();
    assert_eq!(rec.gpus, Some(0));
    let sb = recommend(&hist, "sbatch");
    assert!(!sb.contains("--gpus"), "{sb}");
}

#[test]
fn too_few_jobs_or_sacct_gpu_memory_keep_the_request() {
    let hist: String = (0..4).map(|i| job(i, None, 0.0)).collect();
    let rec: Rec = hpc_core::record::from_line(recommend(&hist, "ndjson").trim()).unwrap();
    assert_eq!(rec.gpus, Some(4), "4 jobs are too few");
    assert_eq!(rec.basis["gpus"].tier, Tier::Heuristic);
    // sacct cannot tell GPUs apart: some memory used means all of them.
    let hist: String = (0..5).map(|i| job(i, None, 1000.0)).collect();
    let rec: Rec = hpc_core::record::from_line(recommend(&hist, "ndjson").trim()).unwrap();
    assert_eq!(rec.gpus, Some(4));
}
