//! Hardware counters through `perf_event_open(2)`, called as a raw syscall.
//!
//! This is the only module with `unsafe`: the syscall, `read(2)` into a
//! `u64` and `close(2)`. Each call is wrapped in a safe function whose
//! comment says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// `PERF_TYPE_HARDWARE`.
pub const TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_HW_CPU_CYCLES`.
pub const HW_CPU_CYCLES: u64 = 0;
/// `PERF_COUNT_HW_INSTRUCTIONS`.
pub const HW_INSTRUCTIONS: u64 = 1;
/// `PERF_COUNT_HW_CACHE_REFERENCES`.
pub const HW_CACHE_REFERENCES: u64 = 2;
/// `PERF_COUNT_HW_CACHE_MISSES`.
pub const HW_CACHE_MISSES: u64 = 3;
/// `PERF_COUNT_SW_TASK_CLOCK` (nanoseconds on CPU).
pub const SW_TASK_CLOCK: u64 = 1;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
pub const SW_CONTEXT_SWITCHES: u64 = 3;

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER5` (112 bytes); the
/// kernel accepts any published size and zero-fills the rest.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// One open counter of one process (and, with inherit, its later children).
#[derive(Debug)]
pub struct Counter {
    fd: OwnedFd,
}

impl Counter {
    /// Opens a counting (not sampling) event for `pid` on any CPU, user
    /// space only, enabled at once.
    pub fn open(type_: u32, config: u64, pid: i32) -> io::Result<Counter> {
        let attr = PerfEventAttr {
            type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            flags: FLAG_INHERIT | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid, fully initialised perf_event_attr whose
        // `size` field matches its layout, and it outlives the call; the
        // other arguments are plain integers (cpu -1 = any, no group fd,
        // FD_CLOEXEC). The kernel only reads `attr`.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                pid as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative return is a new file descriptor that only
        // this Counter owns; OwnedFd closes it once on drop.
        Ok(Counter {
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// The counter's current value.
    pub fn read(&self) -> io::Result<u64> {
        let mut v: u64 = 0;
        // SAFETY: the fd is open (owned by self) and `v` is a writable u64,
        // exactly the 8 bytes a counter without read_format flags returns.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut v as *mut u64).cast::<libc::c_void>(),
                std::mem::size_of::<u64>(),
            )
        };
        if n == 8 {
            Ok(v)
        } else if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "short perf read",
            ))
        }
    }
}

/// The four hardware counters of one process.
#[derive(Debug)]
pub struct PerfSet {
    cycles: Counter,
    instructions: Counter,
    cache_refs: Option<Counter>,
    cache_misses: Option<Counter>,
}

/// Cumulative values of a [`PerfSet`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerfValues {
    /// CPU cycles.
    pub cycles: u64,
    /// Instructions retired.
    pub instructions: u64,
    /// Cache references.
    pub cache_refs: u64,
    /// Cache misses.
    pub cache_misses: u64,
}

impl PerfSet {
    /// Opens cycles and instructions (required) and cache references and
    /// misses (optional) on `pid`.
    pub fn open(pid: i32) -> io::Result<PerfSet> {
        Ok(PerfSet {
            cycles: Counter::open(TYPE_HARDWARE, HW_CPU_CYCLES, pid)?,
            instructions: Counter::open(TYPE_HARDWARE, HW_INSTRUCTIONS, pid)?,
            cache_refs: Counter::open(TYPE_HARDWARE, HW_CACHE_REFERENCES, pid).ok(),
            cache_misses: Counter::open(TYPE_HARDWARE, HW_CACHE_MISSES, pid).ok(),
        })
    }

    /// Reads all four (absent ones read 0).
    pub fn read(&self) -> Option<PerfValues> {
        Some(PerfValues {
            cycles: self.cycles.read().ok()?,
            instructions: self.instructions.read().ok()?,
            cache_refs: self
                .cache_refs
                .as_ref()
                .and_then(|c| c.read().ok())
                .unwrap_or(0),
            cache_misses: self
                .cache_misses
                .as_ref()
                .and_then(|c| c.read().ok())
                .unwrap_or(0),
        })
    }
}

/// Whether this kernel has a hardware PMU the probe may use: tries to open
/// an instruction counter on the probe itself. `Err` says why not.
pub fn hardware_available() -> Result<(), String> {
    open_test_counter().map_err(|e| refusal(&e))
}

/// Opens and reads an instruction counter on the probe itself.
fn open_test_counter() -> io::Result<()> {
    Counter::open(TYPE_HARDWARE, HW_INSTRUCTIONS, 0)?
        .read()
        .map(|_| ())
}

/// Why the test counter did not open, in a few words.
fn refusal(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            "no hardware PMU".to_string()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "not allowed (kernel.perf_event_paranoid)".to_string()
        }
        Some(libc::ENOSYS) => "no perf_event_open in this kernel".to_string(),
        _ => format!("perf_event_open: {e}"),
    }
}

/// `CAP_SYS_ADMIN`.
const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_PERFMON` (Linux 5.8).
const CAP_PERFMON: u32 = 38;

/// Whether the probe may use hardware counters, and why not: what
/// [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Perf {
    /// A test counter opened and read; the `perf_event_paranoid` level.
    Available {
        /// `kernel.perf_event_paranoid`.
        paranoid: i32,
    },
    /// Not looked at (`--no-perf`).
    Disabled,
    /// No `sys/kernel/perf_event_paranoid` under the /proc root: a kernel
    /// (or container) without perf events.
    NoSupport,
    /// `perf_event_paranoid` above 2 and the probe has neither
    /// `CAP_PERFMON` nor `CAP_SYS_ADMIN`: the kernel refuses users.
    Paranoid(i32),
    /// The paranoid level allows it but the test counter did not open.
    Refused {
        /// `kernel.perf_event_paranoid`.
        paranoid: i32,
        /// The errno of `perf_event_open` or `read`, when there was one.
        errno: Option<i32>,
        /// Why, in a few words (the meta's `perf_reason`).
        why: String,
    },
}

impl Perf {
    /// `Ok` when the counters may be used, else why not (the meta's
    /// `perf_reason`).
    pub fn state(&self) -> Result<(), String> {
        match self {
            Perf::Available { .. } => Ok(()),
            Perf::Disabled => Err("disabled (--no-perf)".into()),
            Perf::NoSupport => Err("no perf_event support (no kernel.perf_event_paranoid)".into()),
            Perf::Paranoid(p) => Err(format!("not allowed (kernel.perf_event_paranoid is {p})")),
            Perf::Refused { why, .. } => Err(why.clone()),
        }
    }
}

/// Whether the probe may open hardware counters. `kernel.perf_event_paranoid`
/// is read under `proc_root` (none: no perf events). On the real `/proc` the
/// kernel decides: a test counter is opened on the probe itself, and a
/// refusal with a level above 2 is reported as that level (a vanilla kernel
/// treats 3 and 4 as 2 and lets users count their own processes; distribution
/// kernels refuse them). Under another root (a fixture tree, whose kernel is
/// not this one) the files decide: a level above 2 refuses a probe without
/// `CAP_PERFMON` or `CAP_SYS_ADMIN` (the `CapEff` of `proc_root/self/status`).
/// The sampler and `--sources` both ask this.
pub fn check(proc_root: &Path) -> Perf {
    let Some(paranoid) = read_paranoid(proc_root) else {
        return Perf::NoSupport;
    };
    let refuses = paranoid > 2 && !privileged(proc_root);
    if proc_root != Path::new("/proc") {
        return if refuses {
            Perf::Paranoid(paranoid)
        } else {
            Perf::Available { paranoid }
        };
    }
    match open_test_counter() {
        Ok(()) => Perf::Available { paranoid },
        Err(e) => match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) if refuses => Perf::Paranoid(paranoid),
            errno => Perf::Refused {
                paranoid,
                errno,
                why: match errno {
                    // The paranoid level allows it: something else refuses.
                    Some(libc::EACCES) | Some(libc::EPERM) => format!(
                        "not allowed although kernel.perf_event_paranoid is {paranoid} (seccomp or a security module)"
                    ),
                    _ => refusal(&e),
                },
            },
        },
    }
}

/// `kernel.perf_event_paranoid` under `proc_root`.
pub fn read_paranoid(proc_root: &Path) -> Option<i32> {
    std::fs::read_to_string(proc_root.join("sys/kernel/perf_event_paranoid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `proc_root/self/status` gives the probe `CAP_PERFMON` or
/// `CAP_SYS_ADMIN`.
fn privileged(proc_root: &Path) -> bool {
    std::fs::read_to_string(proc_root.join("self/status"))
        .ok()
        .and_then(|s| cap_eff(&s))
        .is_some_and(|c| c & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN) != 0)
}

/// The `CapEff:` mask of a `/proc/PID/status` text.
pub fn cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burn(ms: u64) -> u64 {
        let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        let mut x = 1u64;
        while std::time::Instant::now() < end {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        x
    }

    #[test]
    fn software_counters_open_read_and_close() {
        let clock = match Counter::open(TYPE_SOFTWARE, SW_TASK_CLOCK, 0) {
            Ok(c) => c,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::ENOSYS)
                ) =>
            {
                hpc_core::note!("perf not allowed here: {e}");
                return;
            }
            Err(e) => panic!("task-clock should open: {e}"),
        };
        let switches = Counter::open(TYPE_SOFTWARE, SW_CONTEXT_SWITCHES, 0).unwrap();
        let a = clock.read().unwrap();
        // Burn until the counter itself says 30 ms of CPU went by (a loaded
        // machine may give this thread less than its wall time).
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut b = a;
        while b - a < 30_000_000 {
            assert!(
                std::time::Instant::now() < end,
                "task clock stuck at {}",
                b - a
            );
            std::hint::black_box(burn(5));
            let next = clock.read().unwrap();
            assert!(next >= b, "task clock went back");
            b = next;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let idle = clock.read().unwrap() - b;
        assert!(idle < 15_000_000, "a sleeping thread uses no CPU: {idle}");
        let _ = switches.read().unwrap();
        drop(clock);
        drop(switches);
    }

    #[test]
    fn hardware_check_says_why_not() {
        match hardware_available() {
            Ok(()) => {
                let s = PerfSet::open(0).unwrap();
                std::hint::black_box(burn(10));
                assert!(s.read().unwrap().instructions > 0);
            }
            Err(why) => assert!(!why.is_empty()),
        }
    }

    #[test]
    fn paranoid_above_2_refuses_an_unprivileged_probe() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        assert_eq!(check(root), Perf::NoSupport, "no perf_event_paranoid");
        std::fs::create_dir_all(root.join("sys/kernel")).unwrap();
        std::fs::write(root.join("sys/kernel/perf_event_paranoid"), "4\n").unwrap();
        assert_eq!(
            check(root),
            Perf::Paranoid(4),
            "no self/status: no capability"
        );
        assert_eq!(
            Perf::Paranoid(4).state(),
            Err("not allowed (kernel.perf_event_paranoid is 4)".into())
        );
        std::fs::create_dir_all(root.join("self")).unwrap();
        std::fs::write(
            root.join("self/status"),
            "Name:\tx\nCapEff:\t0000000000000000\n",
        )
        .unwrap();
        assert_eq!(check(root), Perf::Paranoid(4));
        // CAP_PERFMON (or root's full set): the test counter decides.
        std::fs::write(root.join("self/status"), "CapEff:\t0000004000000000\n").unwrap();
        assert!(matches!(
            check(root),
            Perf::Available { paranoid: 4 } | Perf::Refused { paranoid: 4, .. }
        ));
        std::fs::write(root.join("sys/kernel/perf_event_paranoid"), "2\n").unwrap();
        std::fs::write(root.join("self/status"), "CapEff:\t0\n").unwrap();
        assert!(matches!(
            check(root),
            Perf::Available { paranoid: 2 } | Perf::Refused { paranoid: 2, .. }
        ));
        assert_eq!(cap_eff("CapEff:\t000001fffeffffff\n"), Some(0x1fffeffffff));
        assert_eq!(cap_eff("CapPrm:\t1\n"), None);
    }

    #[test]
    fn bad_pid_is_an_error() {
        assert!(Counter::open(TYPE_SOFTWARE, SW_TASK_CLOCK, i32::MAX).is_err());
    }
}
