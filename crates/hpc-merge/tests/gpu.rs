//! GPU fields across nodes: memory summed, utilisation averaged, and the
//! per-GPU statistics and imbalance in the job summary.

use hpc_testkit::{records, Tool};

const MERGE: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-merge"));

fn node(host: &str, util: [f64; 2], mem: f64) -> String {
    let mut s = format!(
        "{{\"kind\":\"meta\",\"job_id\":\"5\",\"host\":\"{host}\",\"start\":1000,\"interval_s\":1,\"probe_version\":\"t\"}}\n"
    );
    for t in 1000..1004 {
        let avg = (util[0] + util[1]) / 2.0;
        s += &format!("{{\"kind\":\"sample\",\"t\":{t},\"host\":\"{host}\",\"job_id\":\"5\",\"rss_mb\":10,\"gpu_util\":{avg},\"gpu_mem_mb\":{mem},\"gpu_mem_total_mb\":163840,\"gpu_power_w\":300}}\n");
        for (i, u) in util.iter().enumerate() {
            let m = if *u > 0.0 { mem } else { 0.0 };
            s += &format!("{{\"kind\":\"gpu\",\"t\":{t},\"host\":\"{host}\",\"job_id\":\"5\",\"gpu_index\":{i},\"gpu_util\":{u},\"gpu_mem_mb\":{m},\"gpu_mem_total_mb\":81920,\"gpu_procs\":{}}}\n", u32::from(*u > 0.0));
        }
    }
    s
}

#[test]
fn gpu_memory_sums_utilisation_averages_and_each_gpu_is_summarised() {
    let input = node("n1", [80.0, 0.0], 3000.0) + &node("n2", [60.0, 60.0], 1000.0);
    let (code, out, err) = MERGE.cli(&[], &input);
    assert_eq!(code, 0, "{err}");
    let recs = records(&out);
    let samples: Vec<_> = recs.iter().filter(|r| r["kind"] == "sample").collect();
    assert!(!samples.is_empty());
    for s in &samples {
        assert_eq!(s["gpu_mem_mb"], 4000.0, "{s}");
        assert_eq!(s["gpu_mem_total_mb"], 327680.0, "{s}");
        assert_eq!(s["gpu_power_w"], 600.0, "{s}");
        assert_eq!(s["gpu_util"], 50.0, "the mean of 40 and 60: {s}");
    }
    assert_eq!(
        recs.iter().filter(|r| r["kind"] == "gpu").count(),
        16,
        "passed through"
    );
    let job = recs
        .iter()
        .find(|r| r["kind"] == "summary" && r.get("host").is_none())
        .unwrap();
    assert_eq!(job["gpu_util"], 50.0);
    let gpus = job["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 4);
    assert_eq!(
        (gpus[1]["host"].as_str(), gpus[1]["peak_util"].as_f64()),
        (Some("n1"), Some(0.0))
    );
    assert_eq!(gpus[1]["max_procs"], 0);
    assert_eq!(gpus[0]["peak_mem_mb"], 3000.0);
    // Means 80, 0, 60, 60: mean 50, standard deviation 30.
    assert_eq!(job["gpu_util_cv"], 0.6);
}

#[test]
fn without_gpu_records_the_summary_has_no_gpu_fields() {
    let input = "{\"kind\":\"sample\",\"t\":1,\"host\":\"n1\",\"job_id\":\"5\",\"rss_mb\":10}\n{\"kind\":\"sample\",\"t\":2,\"host\":\"n1\",\"job_id\":\"5\",\"rss_mb\":10}\n";
    let (code, out, err) = MERGE.cli(&[], input);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("gpu"), "{out}");
}
