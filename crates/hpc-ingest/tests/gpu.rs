//! GPU use from sacct's TRES usage columns (SLURM 23.02+ with GPU
//! accounting): `gres/gpumem` of TRESUsageInMax and `gres/gpuutil` of
//! TRESUsageInAve into `gpu_mem_max_mb` and `gpu_util`.

use hpc_testkit::{records, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-ingest"));

const HEADER: &str = "JobID|JobIDRaw|State|ElapsedRaw|AllocCPUS|AllocTRES|NNodes|NTasks|ReqMem|MaxRSS|TotalCPU|TRESUsageInMax|TRESUsageInAve";

fn jobs(input: &str) -> Vec<serde_json::Value> {
    let (code, out, err) = TOOL.cli(&["--ndjson", "--utc"], input);
    assert_eq!(code, 0, "{err}");
    records(&out)
        .into_iter()
        .filter(|r| r["kind"] == "job")
        .collect()
}

#[test]
fn gpu_tres_usage_becomes_gpu_memory_and_utilisation() {
    // As `sacct -P` prints them: memory in bytes without a unit (the batch
    // step) or with one (`--units=M`, the numbered step); two tasks of the
    // numbered step at 85 % each over 2 GPUs.
    let input = format!(
        "{HEADER}
10|10|COMPLETED|3600|8|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|1||64G||||
10.batch|10|COMPLETED|3600|8|cpu=8,gres/gpu=2,mem=64G,node=1|1|1||500M|00:00:10|cpu=00:00:10,energy=0,fs/disk=1234,gres/gpumem=1048576000,gres/gpuutil=3,mem=524288000,pages=0,vmem=0|cpu=00:00:10,energy=0,fs/disk=1234,gres/gpumem=1048576000,gres/gpuutil=3,mem=524288000,pages=0,vmem=0
10.0|10|COMPLETED|3500|8|cpu=8,gres/gpu=2,mem=64G,node=1|1|2||2000M|01:00:00|cpu=00:30:00,energy=0,fs/disk=99,gres/gpumem=3000M,gres/gpuutil=92,mem=2000M,pages=0,vmem=0|cpu=00:30:00,energy=0,fs/disk=99,gres/gpumem=2500M,gres/gpuutil=85,mem=1800M,pages=0,vmem=0
10.extern|10|COMPLETED|3600|8|cpu=8,gres/gpu=2,mem=64G,node=1|1|1||0|00:00:00|cpu=00:00:00,energy=0,fs/disk=5273,gres/gpumem=0,gres/gpuutil=0,mem=262144,pages=0,vmem=0|cpu=00:00:00,energy=0,fs/disk=5273,gres/gpumem=0,gres/gpuutil=0,mem=262144,pages=0,vmem=0
"
    );
    let j = jobs(&input);
    assert_eq!(j.len(), 1);
    assert_eq!(j[0]["alloc_gpus"], 2);
    assert_eq!(j[0]["gpu_mem_max_mb"], 3000.0);
    // The steps' GPU use over the GPUs' time: the batch step 3 % x 1 task
    // for 3600 s, step 0 85 % x 2 tasks for 3500 s, over 2 GPUs x 3600 s.
    let want = (3.0 * 3600.0 + 85.0 * 2.0 * 3500.0) / (2.0 * 3600.0);
    assert_eq!(j[0]["gpu_util"], (want * 1e4_f64).round() / 1e4);
}

#[test]
fn an_idle_allocation_with_one_busy_minute_is_idle() {
    // The largest step's utilisation (before) made 4 GPUs held for 10 hours
    // and used for one minute 100 % busy; gpu_idle never saw it.
    let input = format!(
        "{HEADER}
1200|1200|COMPLETED|36000|8|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|1||64G||80:00:00||
1200.batch|1200.batch|COMPLETED|36000|8|cpu=8,gres/gpu=4,mem=64G,node=1|1|1||30G|79:59:00|gres/gpumem=100M,gres/gpuutil=0|gres/gpumem=100M,gres/gpuutil=0
1200.0|1200.0|COMPLETED|60|8|cpu=8,gres/gpu=4,mem=64G,node=1|1|1||1G|00:01:00|gres/gpumem=70000M,gres/gpuutil=400|gres/gpumem=70000M,gres/gpuutil=400
"
    );
    let j = jobs(&input);
    assert_eq!(j[0]["gpu_util"], 0.1667, "{}", j[0]);
    assert_eq!(j[0]["gpu_mem_max_mb"], 70000.0);
}

#[test]
fn older_slurm_without_gpu_tres_leaves_the_fields_out() {
    let input = format!(
        "{HEADER}
11|11|COMPLETED|600|4|billing=4,cpu=4,gres/gpu=1,mem=8G,node=1|1||8G||||
11.batch|11|COMPLETED|600|4|cpu=4,gres/gpu=1,mem=8G,node=1|1|1||500M|00:05:00|cpu=00:05:00,energy=0,fs/disk=1234,mem=524288000,pages=0,vmem=0|cpu=00:05:00,energy=0,fs/disk=1234,mem=524288000,pages=0,vmem=0
"
    );
    let j = jobs(&input);
    assert!(j[0].get("gpu_mem_max_mb").is_none(), "{}", j[0]);
    assert!(j[0].get("gpu_util").is_none(), "{}", j[0]);
    assert_eq!(j[0]["alloc_gpus"], 1);
}

#[test]
fn no_value_from_slurm_is_absent_not_huge() {
    let input = format!(
        "{HEADER}
12|12|COMPLETED|600|4|billing=4,cpu=4,gres/gpu=1,mem=8G,node=1|1||8G||||
12.0|12|COMPLETED|600|4|cpu=4,gres/gpu=1,mem=8G,node=1|1|1||500M|00:05:00|gres/gpumem=18446744073709551614,gres/gpuutil=18446744073709551614|gres/gpuutil=18446744073709551614
"
    );
    let j = jobs(&input);
    assert!(j[0].get("gpu_mem_max_mb").is_none(), "{}", j[0]);
    assert!(j[0].get("gpu_util").is_none(), "{}", j[0]);
}

#[test]
fn a_bad_gpu_tres_value_rejects_the_line_by_name() {
    let input = format!(
        "{HEADER}
13|13|COMPLETED|600|4|billing=4,cpu=4,gres/gpu=1,mem=8G,node=1|1||8G||||
13.0|13|COMPLETED|600|4|cpu=4,gres/gpu=1,mem=8G,node=1|1|1||500M|00:05:00|gres/gpumem=lots|gres/gpuutil=5
"
    );
    let (code, _, err) = TOOL.cli(&["--ndjson", "--utc"], &input);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 3") && err.contains("TRESUsageInMax"),
        "{err}"
    );
}

#[test]
fn headerless_input_of_the_old_and_new_field_lists_is_read() {
    let old = "c|20|20|u|g|a|p|n|COMPLETED|0:0|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|3600|02:00:00|4|billing=4,cpu=4,gres/gpu=1,mem=8G,node=1|1|1|n1|8G||01:00:00\n";
    let new = "c|21|21|u|g|a|p|n|COMPLETED|0:0|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|3600|02:00:00|4|billing=4,cpu=4,gres/gpu=1,mem=8G,node=1|1|1|n1|8G||01:00:00|gres/gpumem=100M|gres/gpuutil=40\n";
    let j = jobs(old);
    assert_eq!((j.len(), j[0]["alloc_gpus"].as_u64()), (1, Some(1)));
    assert!(j[0].get("gpu_util").is_none());
    let j = jobs(new);
    assert_eq!(j[0]["gpu_util"], 40.0);
    assert_eq!(j[0]["gpu_mem_max_mb"], 100.0);
    let (_, fmt, _) = TOOL.cli(&["--sacct-format"], "");
    assert!(
        fmt.trim_end().ends_with(",TRESUsageInMax,TRESUsageInAve"),
        "{fmt}"
    );
}
