//! Per-GPU statistics for the job summary, from the probe's `gpu` records
//! (which are passed through unchanged): each GPU's mean and peak
//! utilisation, peak memory and most processes of the job, and the
//! imbalance between the GPUs.

use std::collections::BTreeMap;

use hpc_core::num::round6;
use hpc_core::record::{from_line, peek_kind, Gpu};
use serde_json::{json, Map, Value};

/// What one GPU's readings add up to.
#[derive(Default)]
struct Acc {
    uuid: Option<String>,
    readings: u64,
    util_sum: f64,
    util_n: u64,
    peak_util: Option<f64>,
    peak_mem_mb: Option<f64>,
    mem_total_mb: Option<f64>,
    max_procs: Option<u32>,
}

fn max_of(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The GPUs seen, by host and NVML index.
#[derive(Default)]
pub(crate) struct GpuStats {
    by: BTreeMap<(String, u32), Acc>,
}

impl GpuStats {
    /// Takes a passed-through line: a `gpu` record is counted, any other
    /// line (or a `gpu` record that does not parse, or has no index) is not.
    pub fn add_line(&mut self, line: &str) {
        if !line.contains("\"gpu\"") || peek_kind(line).as_deref() != Some("gpu") {
            return;
        }
        let Ok(g) = from_line::<Gpu>(line) else {
            return;
        };
        let Some(index) = g.gpu_index else {
            return;
        };
        let a = self
            .by
            .entry((g.host.clone().unwrap_or_default(), index))
            .or_default();
        a.readings += 1;
        if a.uuid.is_none() {
            a.uuid = g.gpu_uuid;
        }
        if let Some(u) = g.gpu_util {
            a.util_sum += u;
            a.util_n += 1;
        }
        a.peak_util = max_of(a.peak_util, g.gpu_util);
        a.peak_mem_mb = max_of(a.peak_mem_mb, g.gpu_mem_mb);
        a.mem_total_mb = max_of(a.mem_total_mb, g.gpu_mem_total_mb);
        a.max_procs = match (a.max_procs, g.gpu_procs) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
    }

    /// Adds `gpus` (one object per GPU) and `gpu_util_cv` (the coefficient
    /// of variation of the GPUs' mean utilisation) to a job summary; nothing
    /// without GPU records.
    pub fn insert_into(&self, extra: &mut Map<String, Value>) {
        if self.by.is_empty() {
            return;
        }
        let mut means = Vec::new();
        let list: Vec<Value> = self
            .by
            .iter()
            .map(|((host, index), a)| {
                let mean = (a.util_n > 0).then(|| a.util_sum / a.util_n as f64);
                means.extend(mean);
                let mut o = json!({ "gpu_index": index, "readings": a.readings });
                let fields = [
                    ("host", (!host.is_empty()).then(|| json!(host))),
                    ("gpu_uuid", a.uuid.as_ref().map(|u| json!(u))),
                    ("mean_util", mean.map(|m| json!(round6(m)))),
                    ("peak_util", a.peak_util.map(|v| json!(round6(v)))),
                    ("peak_mem_mb", a.peak_mem_mb.map(|v| json!(round6(v)))),
                    ("mem_total_mb", a.mem_total_mb.map(|v| json!(round6(v)))),
                    ("max_procs", a.max_procs.map(|v| json!(v))),
                ];
                for (k, v) in fields {
                    if let Some(v) = v {
                        o[k] = v;
                    }
                }
                o
            })
            .collect();
        extra.insert("gpus".into(), Value::Array(list));
        if means.len() > 1 {
            let m = means.iter().sum::<f64>() / means.len() as f64;
            let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / means.len() as f64;
            if m > 0.0 {
                extra.insert("gpu_util_cv".into(), json!(round6(var.sqrt() / m)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gpu_is_summed_up_and_the_imbalance_computed() {
        let mut s = GpuStats::default();
        for (t, u0, m0) in [(1, 80.0, 3000.0), (2, 100.0, 3100.0)] {
            s.add_line(&format!(
                r#"{{"kind":"gpu","t":{t},"host":"n1","gpu_index":0,"gpu_uuid":"GPU-a","gpu_util":{u0},"gpu_mem_mb":{m0},"gpu_mem_total_mb":81920,"gpu_procs":1}}"#
            ));
            s.add_line(&format!(
                r#"{{"kind":"gpu","t":{t},"host":"n1","gpu_index":1,"gpu_util":0,"gpu_mem_mb":0,"gpu_procs":0}}"#
            ));
        }
        s.add_line(r#"{"kind":"flag","job_id":"1","flag":"gpu","reason":"x"}"#);
        s.add_line(r#"{"kind":"gpu","t":3,"gpu_util":5}"#);
        let mut extra = Map::new();
        s.insert_into(&mut extra);
        let g = extra["gpus"].as_array().unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0]["mean_util"], 90.0);
        assert_eq!(g[0]["peak_mem_mb"], 3100.0);
        assert_eq!(g[0]["gpu_uuid"], "GPU-a");
        assert_eq!(g[1]["peak_util"], 0.0);
        assert_eq!(g[1]["max_procs"], 0);
        assert_eq!(g[1]["readings"], 2);
        // Means 90 and 0: standard deviation 45 over mean 45.
        assert_eq!(extra["gpu_util_cv"], 1.0);
        let mut none = Map::new();
        GpuStats::default().insert_into(&mut none);
        assert!(none.is_empty());
    }
}
