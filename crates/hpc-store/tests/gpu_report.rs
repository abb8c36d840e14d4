//! `hpc-store report`: gpu_eff beside gpu_h, and the GPU-hours wasted
//! (issue 13), from job records with sacct's GPU utilisation.

use std::path::Path;
use std::process::{Command, Output};

use hpc_testkit::{feed, records, show, text, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-store"));

/// Runs `hpc-store --db DB ARGS` with no group file of the user's (its
/// config folder is the database's); it must succeed.
fn run(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    TOOL.run_db_ok(db, args, stdin)
}

fn job(id: u32, user: &str, gpu_h: f64, util: Option<f64>) -> String {
    let util = util.map_or(String::new(), |u| format!(",\"gpu_util\":{u}"));
    format!(
        "{{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"{id}\",\"job_id_raw\":\"{id}\",\"user\":\"{user}\",\"state\":\"COMPLETED\",\"is_final\":true,\"start\":\"2026-01-01T00:00:00Z\",\"end\":\"2026-01-01T01:00:00Z\",\"elapsed_s\":3600,\"alloc_cpus\":4,\"cpu_hours_reserved\":4,\"alloc_gpus\":{},\"gpu_hours_reserved\":{gpu_h}{util}}}\n",
        gpu_h as u32
    )
}

fn report(db: &Path) -> Vec<Value> {
    let out = run(db, &["report", "--by", "user", "--format", "ndjson"], b"");
    records(&text(&out.stdout))
}

#[test]
fn gpu_eff_is_weighted_by_gpu_hours_over_jobs_with_a_utilisation() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    // ann: 4 GPU-h at 90 %, 2 GPU-h at 0 %, 1 GPU-h unknown.
    // bob: GPUs without sacct's GPU accounting; cy: no GPU.
    let input = job(1, "ann", 4.0, Some(90.0))
        + &job(2, "ann", 2.0, Some(0.0))
        + &job(3, "ann", 1.0, None)
        + &job(4, "bob", 2.0, None)
        + &job(5, "cy", 0.0, None);
    run(&db, &["put"], input.as_bytes());
    let rows = report(&db);
    let row = |u: &str| rows.iter().find(|r| r["user"] == u).unwrap().clone();
    let ann = row("ann");
    assert_eq!(ann["gpu_h"], 7.0);
    // (4 x 0.9 + 2 x 0) / 6 = 60 %; wasted 0.4 + 2 = 2.4 GPU-h.
    assert_eq!(ann["gpu_eff"], 60.0);
    assert_eq!(ann["gpu_wasted_h"], 2.4);
    let bob = row("bob");
    assert_eq!(bob["gpu_h"], 2.0);
    assert!(
        bob["gpu_eff"].is_null() && bob["gpu_wasted_h"].is_null(),
        "{bob}"
    );
    assert!(row("cy")["gpu_eff"].is_null());
    // The terminal table shows them within 80 columns.
    let out = run(&db, &["report", "--by", "user"], b"");
    let text = text(&out.stdout);
    let head = text.lines().next().unwrap();
    assert!(
        head.contains("gpu_h") && head.contains("gpu%") && head.contains("gpu_w"),
        "{text}"
    );
    let ann_line = text.lines().find(|l| l.starts_with("ann")).unwrap();
    let cells: Vec<&str> = ann_line.split_whitespace().collect();
    assert_eq!(
        cells[cells.len() - 3..],
        ["7.0", "60.0", "2.4"],
        "{ann_line:?}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
#[ignore = "needs hpc-ingest built beside hpc-store: cargo test --workspace -- --ignored (tests/run.sh runs it)"]
fn ingested_gpu_use_reaches_the_report() {
    // sacct lines with SLURM 23.02's GPU TRES, ingested and then reported.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let sacct = "JobID|JobIDRaw|User|State|Start|End|ElapsedRaw|AllocCPUS|AllocTRES|NNodes|NTasks|ReqMem|MaxRSS|TotalCPU|TRESUsageInMax|TRESUsageInAve
20|20|dee|COMPLETED|2026-01-01T00:00:00|2026-01-01T02:00:00|7200|8|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|1||64G||||
20.0|20||COMPLETED|2026-01-01T00:00:00|2026-01-01T02:00:00|7200|8|cpu=8,gres/gpu=4,mem=64G,node=1|1|1||1000M|02:00:00|cpu=02:00:00,gres/gpumem=5000M,gres/gpuutil=100,mem=1000M|cpu=02:00:00,gres/gpumem=4000M,gres/gpuutil=100,mem=900M
";
    let ingest = Path::new(TOOL.bin()).with_file_name("hpc-ingest");
    // hpc-ingest is another crate's binary: built when the workspace is.
    assert!(
        ingest.exists(),
        "{} is not built (cargo build -p hpc-ingest, or cargo test --workspace)",
        ingest.display()
    );
    let out = feed(
        Command::new(&ingest).args(["--db", db.to_str().unwrap(), "--utc"]),
        sacct.as_bytes(),
    );
    assert!(out.status.success(), "{}", show(&out));
    let rows = report(&db);
    // One task at 100 % summed over 4 GPUs: 25 % each; 8 GPU-h, 6 wasted.
    assert_eq!(rows[0]["gpu_h"], 8.0);
    assert_eq!(rows[0]["gpu_eff"], 25.0);
    assert_eq!(rows[0]["gpu_wasted_h"], 6.0);
}
