//! Hardware counters through `perf_event_open(2)`, called as a raw syscall.
//!
//! This is the only module with `unsafe`: the syscall, `read(2)` into a
//! `u64` and `close(2)`. Each call is wrapped in a safe function whose
//! comment says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
    match Counter::open(TYPE_HARDWARE, HW_INSTRUCTIONS, 0) {
        Ok(c) => c.read().map(|_| ()).map_err(|e| format!("read: {e}")),
        Err(e) => Err(match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
                "no hardware PMU".to_string()
            }
            Some(libc::EACCES) | Some(libc::EPERM) => {
                "not allowed (kernel.perf_event_paranoid)".to_string()
            }
            _ => format!("perf_event_open: {e}"),
        }),
    }
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
    fn bad_pid_is_an_error() {
        assert!(Counter::open(TYPE_SOFTWARE, SW_TASK_CLOCK, i32::MAX).is_err());
    }
}
