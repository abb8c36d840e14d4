//! The records of the sizing advice: what `hpc-model analyze` finds in a
//! batch script (`analysis`), what `hpc-model recommend` advises (`rec`) and
//! what `hpc-model backtest` measures (`backtest`). hpc-plot and the `hpc`
//! front door read them; they are written with [`crate::record::tag_into`]
//! like every other record, `kind` first.
//!
//! Units are in the field names, as everywhere: `mem_mb` is MiB, `time_s`
//! seconds. Absent means unknown or not asked for, never 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The resources a batch script asks for in its `#SBATCH` lines, as SLURM
/// would read them (the command line of `sbatch` is not seen here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Memory for the whole job, MiB (`--mem` times nodes, or
    /// `--mem-per-cpu` times CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<f64>,
    /// CPUs for the whole job (`--cpus-per-task` times tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// The time limit, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// GPUs for the whole job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// The GPU type named in `--gres`/`--gpus` (`a100`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// Nodes (`-N`/`--nodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Tasks (`-n`/`--ntasks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntasks: Option<u32>,
    /// The array specification as written (`1-10%2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    /// The partition (`-p`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The account (`-A`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The QOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// The job name (`-J`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

/// A file a script names as its input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    /// The path as written in the script.
    pub path: String,
    /// The size, MiB; absent when the file does not exist or cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_mb: Option<f64>,
    /// The file type from the tool table (`rds`, `h5ad`, `fastq`, ...).
    #[serde(rename = "type")]
    pub file_type: String,
    /// How many times its size the data takes in memory once loaded.
    pub mem_factor: f64,
}

/// What a batch script asks for and what it runs: the `analysis` record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// The job this analysis belongs to, once submitted (`hpc submit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The user who submits it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The script's path as given.
    pub script: String,
    /// SHA-256 of the script's bytes, hex.
    pub script_sha256: String,
    /// The `#SBATCH` requests.
    pub request: Request,
    /// The main language (`R`, `Python`, `bash`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Every known tool found, in the order found.
    #[serde(default)]
    pub tools: Vec<String>,
    /// The primary tool (the one sizing follows); `generic` when none is known.
    pub tool: String,
    /// The input files named in the script (and the script it runs).
    #[serde(default)]
    pub inputs: Vec<InputFile>,
    /// The sum of the inputs' sizes, MiB; absent when none could be sized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_mb: Option<f64>,
}

/// Where a recommended value came from, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// This user's (and tool's) own earlier jobs.
    History,
    /// The fitted per-tool model.
    Model,
    /// The cold-start heuristic from the tool table and input sizes.
    Heuristic,
}

/// Why a value was recommended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Basis {
    /// The tier used.
    pub tier: Tier,
    /// How the value was computed (`order statistic`, `lognormal-t`, ...).
    pub method: String,
    /// How many earlier jobs it rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// The quantile of the distribution used (0.99 for 1 % risk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantile: Option<f64>,
    /// The model's error (the residual quantile added), in the value's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<f64>,
    /// One line for a person: what changed and why.
    pub note: String,
}

/// The advice for the next job: the `rec` record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rec {
    /// The job it was made for, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The user it was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The tool it was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The stated chance that the memory runs out (0.01 for 1 %).
    pub risk: f64,
    /// Memory to request for the whole job, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<f64>,
    /// CPUs to request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Time limit to request, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// GPUs to request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// What the script asked for, when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Request>,
    /// Why, per resource (`mem_mb`, `cpus`, `time_s`, `gpus`).
    #[serde(default)]
    pub basis: BTreeMap<String, Basis>,
}

/// One sizing policy at one risk replayed over a history: the `backtest`
/// record. Wastage follows the sizing literature: over-sizing is
/// (allocation - peak) x runtime, under-sizing each failed attempt's
/// allocation x runtime x the time-to-failure fraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backtest {
    /// The policy (`ours`, `request`, `median`, `p95x1.2`, `max`, ...).
    pub policy: String,
    /// The stated risk, for the policies that take one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<f64>,
    /// What was sized: `mem` (GB-hours) or `time` (hours).
    #[serde(default = "mem")]
    pub resource: String,
    /// Jobs replayed.
    pub jobs: u64,
    /// Jobs sized without an earlier job to go by (cold starts).
    pub cold: u64,
    /// The share of jobs whose first attempt ran out (of memory, of time).
    pub under_share: f64,
    /// The same share over the warm jobs only: what a stated risk promises.
    #[serde(default)]
    pub warm_under_share: f64,
    /// The level the calibrated policy had reached at the end of the replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<f64>,
    /// Memory-time (or time) recommended over what the users requested;
    /// absent when no job had a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memtime_ratio: Option<f64>,
    /// Over-sizing waste, GB-hours (hours for time).
    pub over_gbh: f64,
    /// Under-sizing waste (failed attempts), GB-hours (hours for time).
    pub under_gbh: f64,
    /// `over_gbh + under_gbh`.
    pub wastage_gbh: f64,
    /// Memory allocation quality: used / (used + over + under).
    pub maq: f64,
    /// Failed attempts per job.
    pub retries_per_job: f64,
}

fn mem() -> String {
    "mem".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{from_line, tag_into};

    #[test]
    fn rec_round_trips_with_its_tier_in_lowercase() {
        let mut rec = Rec {
            job_id: None,
            user: Some("ana".into()),
            tool: Some("seurat".into()),
            risk: 0.01,
            mem_mb: Some(18432.0),
            cpus: Some(4),
            time_s: None,
            gpus: None,
            request: None,
            basis: BTreeMap::new(),
        };
        rec.basis.insert(
            "mem_mb".into(),
            Basis {
                tier: Tier::History,
                method: "order statistic".into(),
                n: Some(41),
                quantile: Some(0.99),
                error: None,
                note: "41 jobs".into(),
            },
        );
        let mut buf = Vec::new();
        tag_into(&mut buf, "rec", &rec).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("{\"kind\":\"rec\""), "{text}");
        assert!(text.contains("\"tier\":\"history\""), "{text}");
        assert!(!text.contains("time_s"), "absent stays absent: {text}");
        let back: Rec = from_line(text.trim_end()).unwrap();
        assert_eq!(back, rec);
    }

    #[test]
    fn input_file_type_is_written_as_type() {
        let f = InputFile {
            path: "a.rds".into(),
            size_mb: None,
            file_type: "rds".into(),
            mem_factor: 2.5,
        };
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(text, r#"{"path":"a.rds","type":"rds","mem_factor":2.5}"#);
    }
}
