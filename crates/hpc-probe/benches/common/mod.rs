//! What the probe's benches share (`benches/procfs.rs`, `benches/gpu.rs`
//! and `examples/probe_bench.rs`, which includes this file by path): this
//! process's CPU time, and a tree of sleeping processes to watch.
#![allow(dead_code)] // each bench uses its own part

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// CPU seconds (user + system) this process has used.
pub fn cpu_self() -> f64 {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    tv(r.user_time()) + tv(r.system_time())
}

/// The children of `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// A shell with `n` sleeping children; returns it once they all run.
pub fn start_sleepers(n: usize) -> Child {
    let script = format!("i=0; while [ $i -lt {n} ]; do sleep 100000 & i=$((i+1)); done; wait");
    let c = Command::new("sh")
        .arg("-c")
        .arg(script)
        .spawn()
        .expect("sh");
    let end = Instant::now() + Duration::from_secs(30);
    while children_of(c.id()).len() < n {
        assert!(Instant::now() < end, "sleepers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    c
}

/// Kills the sleepers and their shell.
pub fn stop_sleepers(mut c: Child) {
    for p in children_of(c.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
