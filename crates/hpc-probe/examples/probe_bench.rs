//! Benchmark of the probe's cost per sample and per watched process.
//!
//! For 1, 64 and 512 sleeping processes (children of one `sh`), it measures:
//! - the sampler in this process: CPU time per sample (getrusage), with the
//!   JSON line written to memory;
//! - the floor: a plain loop that only opens and reads the same /proc files
//!   (`stat`, `io`, `task/PID/children`, and `status` for one process in ten);
//! - the real binary (`--pid` of the parent): CPU time per sample from its
//!   own /proc stat read while it is a zombie, and its peak RSS (VmHWM).
//!
//! - the job-cgroup path (issue 22): the same processes moved into a job
//!   cgroup made for the run (v1 `<controller>/hpc-bench-PID/step_0/task_0`
//!   or v2 `hpc-bench-PID/step_0/user/task_0` under /sys/fs/cgroup, needs
//!   root; removed afterwards), sampled as `--job` samples it, with the
//!   per-process detail every 10th sample, beside the per-process path on
//!   the same processes, in the same run.
//!
//! Usage: `probe_bench [SAMPLES] [COUNTS...]` (defaults 200 and 1 64 512).
//! The binary is found beside this example (`target/<profile>/hpc-probe`)
//! or through `HPC_PROBE_BIN`.

#[path = "../benches/common/mod.rs"]
mod common;

use common::{children_of, cpu_self, start_sleepers, stop_sleepers};
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hpc_probe::cgroup::{JobCgroup, Version};
use hpc_probe::node::NodeSources;
use hpc_probe::sampler::{Config, Sampler, Watch};

/// The pause between samples in the "paused" runs, as in real use: caches
/// are cold again at each sample, for the probe and the floor alike (the
/// wake-up itself is then part of both figures).
const PAUSE: Duration = Duration::from_millis(20);

fn floor(pids: &[u32], samples: usize, pause: Duration) -> f64 {
    let mut buf = [0u8; 4096];
    let mut read = |path: &str| {
        if let Ok(mut f) = File::open(path) {
            let _ = f.read(&mut buf);
        }
    };
    let t0 = cpu_self();
    for s in 0..samples {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        for &p in pids {
            read(&format!("/proc/{p}/stat"));
            read(&format!("/proc/{p}/io"));
            read(&format!("/proc/{p}/task/{p}/children"));
            if (s + p as usize) % 10 == 0 {
                read(&format!("/proc/{p}/status"));
            }
        }
    }
    (cpu_self() - t0) / samples as f64
}

/// A sampler of this host's /proc and /sys watching `watch`.
fn sampler(watch: Watch, detail_every: u64, job_id: Option<String>) -> Sampler {
    let cfg = Config {
        proc_root: PathBuf::from("/proc"),
        watch,
        pss: false,
        perf: false,
        cpus: None,
        clk_tck: 100.0,
        page_size: 4096,
        self_pid: std::process::id(),
        host: Some("bench".into()),
        detail_every,
        job_id,
    };
    Sampler::new(
        cfg,
        NodeSources::discover("/proc".as_ref(), "/sys".as_ref()),
    )
}

fn in_process(root: u32, samples: usize, pause: Duration) -> (f64, u32) {
    let mut s = sampler(Watch::Pid(root), 1, None);
    let mut line = Vec::with_capacity(1024);
    let t = Instant::now();
    let first = s.sample(0.0, 0.0, None);
    let n = first.procs.unwrap_or(0);
    let t0 = cpu_self();
    for _ in 0..samples {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let x = s.sample(1.0, t.elapsed().as_secs_f64(), None);
        line.clear();
        hpc_core::record::write_tagged(&mut line, "sample", &x).unwrap();
    }
    ((cpu_self() - t0) / samples as f64, n)
}

/// A job cgroup made for the bench, with the watched processes in it.
struct BenchCgroup {
    cg: JobCgroup,
    /// The job folders, one per hierarchy, and where their processes go back.
    jobs: Vec<(PathBuf, PathBuf)>,
}

const DETAIL_EVERY: u64 = 20;

/// Makes a job cgroup and moves `pids` into its task folder: v1 when the
/// memory hierarchy is mounted at /sys/fs/cgroup/memory, else v2.
fn make_cgroup(pids: &[u32]) -> Result<BenchCgroup, String> {
    let base = std::path::Path::new("/sys/fs/cgroup");
    let name = format!("hpc-bench-{}", std::process::id());
    let put = |task: &std::path::Path| -> Result<(), String> {
        for p in pids {
            std::fs::write(task.join("cgroup.procs"), p.to_string())
                .map_err(|e| format!("cannot move {p} into {}: {e}", task.display()))?;
        }
        Ok(())
    };
    let mk = |d: &std::path::Path| {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))
    };
    if base.join("memory/cgroup.procs").is_file() {
        let mut jobs = Vec::new();
        let mut dir = |c: &str| -> Result<Option<PathBuf>, String> {
            if !base.join(c).join("cgroup.procs").is_file() {
                return Ok(None);
            }
            let job = base.join(c).join(&name);
            let task = job.join("step_0/task_0");
            mk(&task)?;
            jobs.push((job.clone(), base.join(c)));
            put(&task)?;
            Ok(Some(job))
        };
        let memory = dir("memory")?.expect("checked above");
        let cpuacct = dir("cpuacct")?;
        let blkio = dir("blkio")?;
        let pids_dir = dir("pids")?;
        return Ok(BenchCgroup {
            cg: JobCgroup {
                version: Version::V1,
                dir: memory,
                cpuacct,
                devices: None,
                blkio,
                pids: pids_dir,
            },
            jobs,
        });
    }
    let controllers = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.contains("memory") {
        return Err(format!(
            "no v1 memory hierarchy and no v2 memory controller under {}",
            base.display()
        ));
    }
    let job = base.join(&name);
    let task = job.join("step_0/user/task_0");
    mk(&task)?;
    for d in [
        base.to_path_buf(),
        job.clone(),
        job.join("step_0"),
        job.join("step_0/user"),
    ] {
        for c in ["+cpu", "+memory", "+io", "+pids"] {
            let _ = std::fs::write(d.join("cgroup.subtree_control"), c);
        }
    }
    let bc = BenchCgroup {
        cg: JobCgroup::v2(job.clone()),
        jobs: vec![(job, base.to_path_buf())],
    };
    put(&task)?;
    Ok(bc)
}

/// Moves what is left back to the hierarchies' roots and removes the
/// folders, deepest first.
fn remove_cgroup(bc: BenchCgroup) {
    for (job, root) in bc.jobs {
        let mut dirs = Vec::new();
        let mut stack = vec![job];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(
                    rd.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let left = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
            for p in left.split_whitespace() {
                let _ = std::fs::write(root.join("cgroup.procs"), p);
            }
            let end = Instant::now() + Duration::from_secs(5);
            while let Err(e) = std::fs::remove_dir(d) {
                if Instant::now() > end {
                    eprintln!("probe_bench: cannot remove {}: {e}", d.display());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// CPU microseconds per sample: (median of the samples without detail,
/// median of the detail samples, mean of all). Each sample reads the
/// cgroup's counters and writes its JSON line to memory.
fn measure(watch: Watch, every: u64, samples: usize) -> (f64, f64, f64, u32) {
    let mut s = sampler(watch, every, Some("1".into()));
    let mut line = Vec::with_capacity(1024);
    let t = Instant::now();
    let (mut fast, mut detail) = (Vec::new(), Vec::new());
    let mut procs = 0;
    let t_all = cpu_self();
    for i in 0..=samples {
        std::thread::sleep(PAUSE);
        if i == samples {
            s.detail_next();
        }
        let t0 = cpu_self();
        let c = s.cgroup_counters();
        let x = s.sample(1.0, t.elapsed().as_secs_f64(), c);
        line.clear();
        hpc_core::record::write_tagged(&mut line, "sample", &x).unwrap();
        let dt = (cpu_self() - t0) * 1e6;
        procs = x.procs.unwrap_or(0);
        if s.last_was_detail() {
            detail.push(dt);
        } else {
            fast.push(dt);
        }
    }
    // The sleeps' own wake-ups are in the mean, as in real use.
    let mean = (cpu_self() - t_all) * 1e6 / (samples + 1) as f64;
    let med = |v: &mut Vec<f64>| {
        if v.is_empty() {
            f64::NAN
        } else {
            common::median(v)
        }
    };
    (med(&mut fast), med(&mut detail), mean, procs)
}

/// The job-cgroup path beside the per-process path, for each count.
fn cgroup_table(samples: usize, counts: &[usize]) {
    println!();
    println!(
        "job cgroup path (issue 22): --detail-every {DETAIL_EVERY}, {} ms between samples, CPU us per sample (getrusage)",
        PAUSE.as_millis()
    );
    println!(
        "{:>6} {:>8} {:>14} {:>14} {:>14} {:>16} {:>16}",
        "procs",
        "cgroup",
        "cgroup us/smp",
        "detail us/smp",
        "mean us/smp",
        "per-proc us/smp",
        "per-proc mean"
    );
    let mut rows = Vec::new();
    for &n in counts {
        let tree = start_sleepers(n);
        let root = tree.id();
        let mut pids = vec![root];
        pids.extend(children_of(root));
        let bc = match make_cgroup(&pids) {
            Ok(bc) => bc,
            Err(e) => {
                println!("no job cgroup for the bench ({e}): the cgroup rows are skipped (run as root on a node with a writable cgroup)");
                stop_sleepers(tree);
                return;
            }
        };
        let version = match bc.cg.version {
            Version::V1 => "v1",
            Version::V2 => "v2",
        };
        let job = Watch::Job {
            id: "1".into(),
            cgroup: Some(bc.cg.clone()),
        };
        let (fast, detail, mean, procs) = measure(job, DETAIL_EVERY, samples);
        // Every sample of the per-process path reads every process: all
        // are detail samples.
        let (_, pp_med, pp_mean, _) = measure(Watch::Pid(root), 1, samples);
        println!(
            "{:>6} {:>8} {:>14.1} {:>14.1} {:>14.1} {:>16.1} {:>16.1}",
            procs, version, fast, detail, mean, pp_med, pp_mean
        );
        rows.push((n, fast, mean));
        stop_sleepers(tree);
        remove_cgroup(bc);
    }
    let first = rows.iter().find(|r| r.0 == 1);
    let last = rows.iter().find(|r| r.0 == 512);
    if let (Some(a), Some(b)) = (first, last) {
        println!(
            "cgroup path at 512 processes: {:.1} us per sample, {:.2}x its cost at 1 (target: at most 3x and 2000 us); with the detail samples spread in: {:.1} us, {:.2}x",
            b.1,
            b.1 / a.1,
            b.2,
            b.2 / a.2
        );
    }
}

fn probe_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("HPC_PROBE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("hpc-probe")
}

/// Runs the binary; returns (CPU s per sample, peak RSS MiB).
fn binary(root: u32, samples: usize) -> (f64, f64) {
    let mut c = Command::new(probe_bin())
        .args([
            "--pid",
            &root.to_string(),
            "--interval",
            "0.02",
            "--dense-for",
            "100000",
            "--no-perf",
        ])
        .args(["--samples", &samples.to_string(), "--out", "/dev/null"])
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", probe_bin().display()));
    let pid = c.id();
    let mut hwm_kb = 0u64;
    loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(h) = s.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                let kb: u64 = h.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                hwm_kb = hwm_kb.max(kb);
            }
        }
        // Wait without reaping, so /proc/PID/stat still holds its CPU times.
        let flags = nix::sys::wait::WaitPidFlag::WEXITED
            | nix::sys::wait::WaitPidFlag::WNOWAIT
            | nix::sys::wait::WaitPidFlag::WNOHANG;
        match nix::sys::wait::waitid(
            nix::sys::wait::Id::Pid(nix::unistd::Pid::from_raw(pid as i32)),
            flags,
        ) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => break,
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    let st = c.wait().unwrap();
    assert!(st.success(), "probe failed: {st:?}");
    (ticks / 100.0 / samples as f64, hwm_kb as f64 / 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let samples: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut counts: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    if counts.is_empty() {
        counts = vec![1, 64, 512];
    }
    println!("hpc-probe benchmark: {samples} samples per case, sleeping processes under one sh");
    println!(
        "{:>6} {:>7} {:>12} {:>12} {:>12} {:>13} {:>6} {:>13} {:>9}",
        "procs",
        "mode",
        "probe us/smp",
        "us/proc/smp",
        "floor us/smp",
        "floor us/proc",
        "ratio",
        "binary us/smp",
        "peak MiB"
    );
    let counts_again = counts.clone();
    for n in counts {
        let tree = start_sleepers(n);
        let root = tree.id();
        let mut pids = vec![root];
        pids.extend(children_of(root));
        let (bin_cpu, peak) = binary(root, samples.min(100));
        for (mode, pause) in [("hot", Duration::ZERO), ("paused", PAUSE)] {
            let (probe, watched) = in_process(root, samples, pause);
            let fl = floor(&pids, samples, pause);
            let w = f64::from(watched.max(1));
            let (b, p) = if pause.is_zero() {
                (String::from("-"), String::from("-"))
            } else {
                (format!("{:.1}", bin_cpu * 1e6), format!("{peak:.2}"))
            };
            println!(
                "{:>6} {:>7} {:>12.1} {:>12.2} {:>12.1} {:>13.2} {:>6.2} {:>13} {:>9}",
                watched,
                mode,
                probe * 1e6,
                probe * 1e6 / w,
                fl * 1e6,
                fl * 1e6 / w,
                probe / fl.max(1e-9),
                b,
                p
            );
        }
        stop_sleepers(tree);
    }
    println!("hot: samples back to back; paused: 20 ms sleep between samples (CPU of the wake-up included)");
    cgroup_table(samples, &counts_again);
    println!("binary: the real binary, --interval 0.02, CPU per sample from its /proc stat (10 ms ticks), peak = VmHWM");
}
