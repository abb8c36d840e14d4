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

fn in_process(root: u32, samples: usize, pause: Duration) -> (f64, u32) {
    let cfg = Config {
        proc_root: PathBuf::from("/proc"),
        watch: Watch::Pid(root),
        pss: false,
        perf: false,
        cpus: None,
        clk_tck: 100.0,
        page_size: 4096,
        self_pid: std::process::id(),
        host: Some("bench".into()),
        job_id: None,
    };
    let mut s = Sampler::new(
        cfg,
        NodeSources::discover("/proc".as_ref(), "/sys".as_ref()),
    );
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
    println!("binary: the real binary, --interval 0.02, CPU per sample from its /proc stat (10 ms ticks), peak = VmHWM");
}
