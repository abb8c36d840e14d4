//! The `procfs` crate against the probe's own /proc parsers, on the real
//! /proc files of live processes (this bench and 64 sleeping children).
//!
//! For each of `stat`, `statm`, `io` and `status` it times, in CPU time of
//! this process (kernel time to make the text included), one read and
//! parse of the file by:
//! - `probe`: the sampler's path, `read_file` into a reused buffer and a
//!   path string, then the parser in `hpc_probe::parse` (`statm`, which
//!   the probe does not read, is split with `parse::parse_u64`);
//! - `procfs`: `Process::stat()` (etc.) on a `Process` opened once per pid
//!   before the clock starts, procfs's cheapest use;
//! - `procfs+new`: `Process::new` and the read each time, as a sampler
//!   holding no handles across rounds would do;
//! - `procfs-parse`: procfs's parser (`FromRead`) over the probe's buffer,
//!   the probe's read kept.
//!
//! Each figure is the median of 7 runs (the variants take turns) of
//! `ROUNDS` passes over every pid. Run it with
//! `cargo bench -p hpc-probe --bench procfs [-- ROUNDS]`.

use std::fmt::Write as _;
use std::path::Path;

mod common;

use common::{children_of, cpu_self, median, start_sleepers, stop_sleepers};
use hpc_probe::parse;
use hpc_probe::read_file;
use procfs::process::Process;
use procfs::FromRead;

const SLEEPERS: usize = 64;
const RUNS: usize = 7;

/// The probe's reads: a reused path string and buffer, as in the sampler.
struct Probe {
    path: String,
    buf: Vec<u8>,
}

impl Probe {
    fn read(&mut self, pid: u32, file: &str) -> bool {
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/{file}");
        read_file(Path::new(&self.path), &mut self.buf).is_ok()
    }
}

/// `statm` as the probe would split it: resident pages, the second field.
fn statm_resident(buf: &[u8]) -> Option<u64> {
    buf.split(|b| b.is_ascii_whitespace())
        .nth(1)
        .and_then(parse::parse_u64)
}

/// One file's four ways; each returns a checksum so that nothing is
/// optimised away (and the ways can be compared).
struct Case {
    file: &'static str,
    probe: fn(&[u8]) -> u64,
    procfs: fn(&Process) -> u64,
    procfs_parse: fn(&[u8]) -> u64,
}

fn cases() -> [Case; 4] {
    [
        Case {
            file: "stat",
            probe: |b| parse::parse_stat(b).map_or(0, |s| s.utime + s.starttime + s.rss_pages),
            procfs: |p| p.stat().map_or(0, |s| s.utime + s.starttime + s.rss),
            procfs_parse: |b| {
                procfs::process::Stat::from_read(b).map_or(0, |s| s.utime + s.starttime + s.rss)
            },
        },
        Case {
            file: "statm",
            probe: |b| statm_resident(b).unwrap_or(0),
            procfs: |p| p.statm().map_or(0, |s| s.resident),
            procfs_parse: |b| procfs::process::StatM::from_read(b).map_or(0, |s| s.resident),
        },
        Case {
            file: "io",
            probe: |b| parse::parse_io(b).map_or(0, |i| i.read_bytes + i.write_bytes),
            procfs: |p| p.io().map_or(0, |i| i.read_bytes + i.write_bytes),
            procfs_parse: |b| {
                procfs::process::Io::from_read(b).map_or(0, |i| i.read_bytes + i.write_bytes)
            },
        },
        Case {
            file: "status",
            probe: |b| {
                let s = parse::parse_status(b);
                s.hwm_kb.unwrap_or(0) + s.swap_kb.unwrap_or(0)
            },
            procfs: |p| {
                p.status()
                    .map_or(0, |s| s.vmhwm.unwrap_or(0) + s.vmswap.unwrap_or(0))
            },
            procfs_parse: |b| {
                procfs::process::Status::from_read(b)
                    .map_or(0, |s| s.vmhwm.unwrap_or(0) + s.vmswap.unwrap_or(0))
            },
        },
    ]
}

/// CPU nanoseconds per read of `f` over `rounds` passes of `pids`.
fn per_read(pids: &[u32], rounds: usize, mut f: impl FnMut(u32) -> u64) -> f64 {
    let mut sum = 0u64;
    let t0 = cpu_self();
    for _ in 0..rounds {
        for &p in pids {
            sum = sum.wrapping_add(f(p));
        }
    }
    let dt = cpu_self() - t0;
    std::hint::black_box(sum);
    dt * 1e9 / (rounds * pids.len()) as f64
}

/// The sleepers' values by both parsers agree (they are idle, so their
/// files do not change between the two reads).
fn check_agreement(case: &Case, pids: &[u32], probe: &mut Probe, handles: &[Process]) {
    for (&pid, h) in pids.iter().zip(handles).skip(1) {
        assert!(
            probe.read(pid, case.file),
            "cannot read {pid}/{}",
            case.file
        );
        let ours = (case.probe)(&probe.buf);
        assert_eq!(
            ours,
            (case.procfs)(h),
            "{pid}/{}: probe and procfs",
            case.file
        );
        assert_eq!(ours, (case.procfs_parse)(&probe.buf), "{pid}/{}", case.file);
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let sh = start_sleepers(SLEEPERS);
    let mut pids = vec![std::process::id()];
    pids.extend(children_of(sh.id()));
    let handles: Vec<Process> = pids
        .iter()
        .map(|&p| Process::new(p as i32).expect("procfs Process::new"))
        .collect();
    let mut probe = Probe {
        path: String::with_capacity(64),
        buf: Vec::with_capacity(8192),
    };
    println!(
        "procfs 0.18 against hpc-probe's parsers: CPU ns per read, median of {RUNS} runs of {rounds} passes over {} live processes",
        pids.len()
    );
    println!(
        "{:<7} {:>9} {:>9} {:>11} {:>13}   {:>7} {:>11} {:>13}",
        "file",
        "probe",
        "procfs",
        "procfs+new",
        "procfs-parse",
        "procfs",
        "procfs+new",
        "procfs-parse"
    );
    for case in cases() {
        check_agreement(&case, &pids, &mut probe, &handles);
        let mut t: [Vec<f64>; 4] = Default::default();
        for _ in 0..RUNS {
            t[0].push(per_read(&pids, rounds, |p| {
                if probe.read(p, case.file) {
                    (case.probe)(&probe.buf)
                } else {
                    0
                }
            }));
            let mut i = 0;
            t[1].push(per_read(&pids, rounds, |_| {
                let h = &handles[i % handles.len()];
                i += 1;
                (case.procfs)(h)
            }));
            t[2].push(per_read(&pids, rounds, |p| {
                Process::new(p as i32).map_or(0, |h| (case.procfs)(&h))
            }));
            t[3].push(per_read(&pids, rounds, |p| {
                if probe.read(p, case.file) {
                    (case.procfs_parse)(&probe.buf)
                } else {
                    0
                }
            }));
        }
        let [a, b, c, d] = t.map(|mut v| median(&mut v));
        println!(
            "{:<7} {a:>9.0} {b:>9.0} {c:>11.0} {d:>13.0}   {:>6.2}x {:>10.2}x {:>12.2}x",
            case.file,
            b / a,
            c / a,
            d / a
        );
    }
    stop_sleepers(sh);
}
