//! Command-line flags (`Args`) and the checked options (`Opts`).

use std::path::PathBuf;

use argh::FromArgs;
use hpc_core::{Error, Result};

/// The longest interval, seconds.
const DAY: f64 = 86_400.0;

/// Sample the processes of a SLURM job on this node (or a pid and its
/// descendants, or a command) and write one NDJSON line per sample: a
/// `meta` record, then `sample` records, the last one on exit.
#[derive(FromArgs, Debug)]
#[argh(
    example = "hpc-probe --job $SLURM_JOB_ID --out $HPC_SIZER_SPOOL/$SLURM_JOB_ID/$(hostname).ndjson &",
    example = "hpc-probe --pid 4242 --interval 2 | hpc-merge",
    example = "hpc-probe --out run.ndjson -- ./solver input.dat",
    example = "hpc-probe --sources",
    note = "Exit status: 0 on success, on SIGTERM/SIGINT/SIGHUP (after a last sample) or when the watched processes are gone; 1 on a runtime failure (nothing to watch, an output that is a symbolic link or is being written by another probe); 2 on a usage error; with a command, the command's own status (the command never outlives the probe); --sources: 0 whatever the sources are."
)]
pub struct Args {
    /// watch the processes of this SLURM job on this node (its cgroup, or
    /// SLURM_JOB_ID in the environment of the user's processes)
    #[argh(option)]
    pub job: Option<String>,
    /// watch this process and all its descendants
    #[argh(option)]
    pub pid: Option<u32>,
    /// write to FILE (mode 0600, never through a symbolic link, locked against a second probe) instead of stdout
    #[argh(option, short = 'o')]
    pub out: Option<PathBuf>,
    /// seconds between samples at first and after a change (default 1)
    #[argh(option, default = "1.0")]
    pub interval: f64,
    /// longest interval while the job is steady, seconds (default 30, or
    /// --interval when that is longer)
    #[argh(option)]
    pub max_interval: Option<f64>,
    /// seconds of dense sampling at the start (default 60)
    #[argh(option, default = "60.0")]
    pub dense_for: f64,
    /// CPUs allocated on this node, for cpu_frac (default SLURM_CPUS_ON_NODE)
    #[argh(option)]
    pub cpus: Option<u32>,
    /// also read smaps_rollup for PSS (costs more CPU)
    #[argh(switch)]
    pub pss: bool,
    /// with a job cgroup, read every process's files (threads,
    /// per-process peaks and I/O, --pss) only every Nth sample, at least
    /// one for every 8 processes, and on the first and last (default 20;
    /// 1: every sample); with no CPU counters in the cgroup, as often as
    /// one for every 8 processes allows
    #[argh(option, default = "20")]
    pub detail_every: u64,
    /// accepted for old scripts: a job probe now always stops once no process of the job is left
    #[argh(switch)]
    pub until_gone: bool,
    /// stop after this many samples
    #[argh(option)]
    pub samples: Option<u64>,
    /// do not open hardware performance counters
    #[argh(switch)]
    pub no_perf: bool,
    /// the /proc tree to read (default /proc)
    #[argh(option, default = "PathBuf::from(\"/proc\")")]
    pub proc_root: PathBuf,
    /// the /sys tree to read (default /sys)
    #[argh(option, default = "PathBuf::from(\"/sys\")")]
    pub sys_root: PathBuf,
    /// the /dev tree where --sources counts GPU device files (default /dev)
    #[argh(option, default = "PathBuf::from(\"/dev\")")]
    pub dev_root: PathBuf,
    /// print the data sources the probe finds on this node, one
    /// `STATUS SOURCE DETAIL` line each (cgroup, perf, numa, lustre, rapl,
    /// infiniband, gpus), and exit 0; watches nothing
    #[argh(switch)]
    pub sources: bool,
    /// the command to run and watch, after `--`
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

/// What the probe watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A SLURM job id.
    Job(String),
    /// A process id.
    Pid(u32),
    /// A command to run.
    Command(Vec<String>),
}

/// What the SLURM environment says about the job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmEnv {
    /// `SLURM_JOB_ID`.
    pub job_id: Option<String>,
    /// `SLURM_STEP_ID`.
    pub step: Option<String>,
    /// `SLURM_CPUS_ON_NODE`.
    pub cpus_on_node: Option<u32>,
    /// `SLURM_MEM_PER_NODE`, MiB.
    pub mem_per_node: Option<f64>,
    /// `SLURM_MEM_PER_CPU`, MiB.
    pub mem_per_cpu: Option<f64>,
    /// `SLURM_GPUS_ON_NODE`.
    pub gpus_on_node: Option<u32>,
    /// `SLURM_JOB_NUM_NODES` (or `SLURM_NNODES`).
    pub nnodes: Option<u32>,
    /// `SLURMD_NODENAME`: the node's name as SLURM (and sacct's NodeList)
    /// has it.
    pub node_name: Option<String>,
    /// The variables that say which GPUs are the job's (and the GPU
    /// fixture), as set: see [`crate::gpu::wanted`].
    pub gpu_vars: Vec<(&'static str, String)>,
}

/// The variables kept in [`SlurmEnv::gpu_vars`].
const GPU_VARS: [&str; 4] = [
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "CUDA_VISIBLE_DEVICES",
    crate::gpu::FIXTURE_ENV,
];

impl SlurmEnv {
    /// Reads the variables through `get`.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Self {
        let num = |k: &str| get(k).and_then(|v| v.trim().parse::<u32>().ok());
        let mb = |k: &str| {
            get(k).and_then(|v| {
                hpc_core::slurm::parse_mem(v.trim(), 1024.0 * 1024.0)
                    .ok()
                    .flatten()
                    .map(|m| m.mb)
            })
        };
        SlurmEnv {
            job_id: get("SLURM_JOB_ID").filter(|v| !v.is_empty()),
            step: get("SLURM_STEP_ID").filter(|v| !v.is_empty()),
            cpus_on_node: num("SLURM_CPUS_ON_NODE"),
            mem_per_node: mb("SLURM_MEM_PER_NODE"),
            mem_per_cpu: mb("SLURM_MEM_PER_CPU"),
            gpus_on_node: num("SLURM_GPUS_ON_NODE"),
            nnodes: num("SLURM_JOB_NUM_NODES").or_else(|| num("SLURM_NNODES")),
            node_name: get("SLURMD_NODENAME").filter(|v| !v.is_empty()),
            gpu_vars: GPU_VARS
                .iter()
                .filter_map(|&k| get(k).map(|v| (k, v)))
                .collect(),
        }
    }

    /// A variable as the GPU code reads it: the GPU ones and `SLURM_JOB_ID`.
    pub fn get(&self, k: &str) -> Option<String> {
        if k == "SLURM_JOB_ID" {
            return self.job_id.clone();
        }
        self.gpu_vars
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.clone())
    }

    /// Requested memory on this node, MiB: per node, or per CPU times CPUs.
    pub fn req_mem_mb(&self) -> Option<f64> {
        self.mem_per_node.or_else(|| {
            self.mem_per_cpu
                .zip(self.cpus_on_node)
                .map(|(m, c)| m * f64::from(c))
        })
    }
}

/// Checked options.
#[derive(Debug, Clone)]
pub struct Opts {
    /// What to watch.
    pub target: Target,
    /// Output file (`None` = stdout).
    pub out: Option<PathBuf>,
    /// Minimum interval, seconds.
    pub interval: f64,
    /// Maximum interval, seconds.
    pub max_interval: f64,
    /// Dense sampling period, seconds.
    pub dense_for: f64,
    /// Allocated CPUs for `cpu_frac`.
    pub cpus: Option<u32>,
    /// Read PSS.
    pub pss: bool,
    /// Per-process detail every this many samples, with a job cgroup.
    pub detail_every: u64,
    /// Stop after this many samples.
    pub samples: Option<u64>,
    /// No hardware counters.
    pub no_perf: bool,
    /// /proc root.
    pub proc_root: PathBuf,
    /// /sys root.
    pub sys_root: PathBuf,
    /// The SLURM environment.
    pub env: SlurmEnv,
}

impl Opts {
    /// Checks the flags; `get` reads environment variables.
    pub fn from_args(a: Args, get: impl Fn(&str) -> Option<String>) -> Result<Opts> {
        let usage = |m: &str| Err(Error::Usage(m.to_string()));
        let n = usize::from(a.job.is_some())
            + usize::from(a.pid.is_some())
            + usize::from(!a.command.is_empty());
        if n != 1 {
            return usage("give exactly one of --job ID, --pid PID or -- COMMAND (or --sources)");
        }
        let target = if let Some(j) = a.job {
            if hpc_core::slurm::parse_job_id(&j).is_err() || j.contains('/') {
                return usage(&format!("--job '{j}': not a job id"));
            }
            Target::Job(j)
        } else if let Some(p) = a.pid {
            if p == 0 {
                return usage("--pid 0: not a process");
            }
            Target::Pid(p)
        } else {
            Target::Command(a.command)
        };
        // At most a day: beyond, an interval is no sampling (and a
        // Duration of 1e20 s does not exist).
        if !(a.interval.is_finite() && (0.01..=DAY).contains(&a.interval)) {
            return usage("--interval must be 0.01 to 86400 seconds");
        }
        let max_interval = a.max_interval.unwrap_or(a.interval.max(30.0));
        if !(max_interval.is_finite() && (a.interval..=DAY).contains(&max_interval)) {
            return usage("--max-interval must be at least --interval and at most 86400 seconds");
        }
        if !(a.dense_for.is_finite() && a.dense_for >= 0.0) {
            return usage("--dense-for must be 0 or more seconds");
        }
        if a.samples == Some(0) {
            return usage("--samples must be at least 1");
        }
        if a.cpus == Some(0) {
            return usage("--cpus must be at least 1");
        }
        if a.detail_every == 0 {
            return usage("--detail-every must be at least 1");
        }
        let env = SlurmEnv::from_env(get);
        Ok(Opts {
            target,
            out: a.out,
            interval: a.interval,
            max_interval,
            dense_for: a.dense_for,
            cpus: a.cpus.or(env.cpus_on_node),
            pss: a.pss,
            detail_every: a.detail_every,
            samples: a.samples,
            no_perf: a.no_perf,
            proc_root: a.proc_root,
            sys_root: a.sys_root,
            env,
        })
    }

    /// Default options for a target (tests).
    pub fn for_test(target: Target) -> Opts {
        Opts {
            target,
            out: None,
            interval: 1.0,
            max_interval: 30.0,
            dense_for: 60.0,
            cpus: None,
            pss: false,
            detail_every: 20,
            samples: None,
            no_perf: true,
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            env: SlurmEnv::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<Args, argh::EarlyExit> {
        Args::from_args(&["hpc-probe"], args)
    }

    #[test]
    fn exactly_one_target() {
        let none = |_: &str| None;
        assert!(Opts::from_args(parse(&[]).unwrap(), none).is_err());
        assert!(Opts::from_args(parse(&["--job", "1", "--pid", "2"]).unwrap(), none).is_err());
        let o = Opts::from_args(parse(&["--", "sh", "-c", "exit 3"]).unwrap(), none).unwrap();
        assert_eq!(
            o.target,
            Target::Command(vec!["sh".into(), "-c".into(), "exit 3".into()])
        );
        let o =
            Opts::from_args(parse(&["--pid", "7", "--interval", "0.5"]).unwrap(), none).unwrap();
        assert_eq!(o.target, Target::Pid(7));
        assert_eq!(o.interval, 0.5);
        let e = Opts::from_args(
            parse(&["--pid", "7", "--max-interval", "0.5"]).unwrap(),
            none,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Usage(_)));
        assert!(Opts::from_args(parse(&["--job", "../x"]).unwrap(), none).is_err());
    }

    #[test]
    fn an_interval_is_a_day_at_most_and_raises_the_default_longest() {
        // 1e20 s panicked making a Duration; --interval 60 alone was refused
        // for a --max-interval the user never gave.
        let none = |_: &str| None;
        let e = Opts::from_args(
            parse(&["--pid", "7", "--interval", "1e20", "--max-interval", "1e20"]).unwrap(),
            none,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Usage(_)));
        let o = Opts::from_args(parse(&["--pid", "7", "--interval", "60"]).unwrap(), none).unwrap();
        assert_eq!((o.interval, o.max_interval), (60.0, 60.0));
        let o = Opts::from_args(parse(&["--pid", "7"]).unwrap(), none).unwrap();
        assert_eq!((o.interval, o.max_interval), (1.0, 30.0));
    }

    #[test]
    fn slurm_environment() {
        let env = |k: &str| -> Option<String> {
            match k {
                "SLURM_JOB_ID" => Some("42".into()),
                "SLURM_CPUS_ON_NODE" => Some("8".into()),
                "SLURM_MEM_PER_CPU" => Some("2000".into()),
                "SLURM_GPUS_ON_NODE" => Some("2".into()),
                "SLURM_JOB_NUM_NODES" => Some("3".into()),
                _ => None,
            }
        };
        let o = Opts::from_args(parse(&["--pid", "1"]).unwrap(), env).unwrap();
        assert_eq!(o.env.req_mem_mb(), Some(16000.0));
        assert_eq!(o.cpus, Some(8));
        assert_eq!(o.env.gpus_on_node, Some(2));
        assert_eq!(o.env.nnodes, Some(3));
        let s = SlurmEnv::from_env(|k| (k == "SLURM_MEM_PER_NODE").then(|| "64000".into()));
        assert_eq!(s.req_mem_mb(), Some(64000.0));
        let o = Opts::from_args(parse(&["--pid", "1", "--cpus", "4"]).unwrap(), env).unwrap();
        assert_eq!(o.cpus, Some(4));
    }
}
