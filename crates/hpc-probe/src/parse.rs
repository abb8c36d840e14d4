//! Hand-written parsers for the /proc and /sys files the probe reads.
//!
//! They take the file's bytes (a reused buffer in the hot path, a literal in
//! tests), allocate nothing and never panic on odd input: a missing or
//! malformed field gives `None` or is skipped.
//!
//! # Why not the `procfs` crate
//!
//! `cargo bench -p hpc-probe --bench procfs` (benches/procfs.rs) times
//! procfs 0.18 against these parsers on the real /proc files of 65 live
//! processes: CPU ns per read and parse, median of 7 runs of 400 passes,
//! on the 2-core development machine (the share of procfs against the
//! probe's path in brackets):
//!
//! | file     | probe | procfs, handle kept | procfs, new handle | procfs parser on the probe's read |
//! |----------|------:|--------------------:|-------------------:|----------------------------------:|
//! | `stat`   |  8970 |      10354 (1.15x)  |     13064 (1.46x)  |                    10012 (1.12x)  |
//! | `statm`  |  6252 |       6792 (1.09x)  |      9482 (1.52x)  |                     6391 (1.02x)  |
//! | `io`     |  6768 |       7769 (1.15x)  |     10516 (1.55x)  |                     8173 (1.21x)  |
//! | `status` | 14876 |      33506 (2.25x)  |     36246 (2.44x)  |                    33855 (2.28x)  |
//!
//! - `status` costs over 1.3x in every form (procfs parses every line into
//!   a map): not used.
//! - `Process::new` for each read costs about 1.5x for every file; keeping
//!   one handle (an open directory) per watched process, or running
//!   procfs's parser over the probe's own read, stays within 1.3x for
//!   `stat`, `statm` and `io`.
//! - `statm` is not read at all: the probe takes RSS from `stat`.
//! - `stat` and `io` are not taken from procfs all the same, because its
//!   parsers reject input the probe reads today and can panic (a release
//!   build aborts on panic, ending the probe): `Stat` wants 35 fields where
//!   the probe needs 24 (the procfs project's own `26231/stat` fixture has
//!   26), `Io` wants all seven lines as unsigned numbers (so a negative
//!   `cancelled_write_bytes` loses `read_bytes` and `write_bytes` too), and
//!   both index their text unchecked (`1 (x)` as a stat, a non-ASCII key in
//!   io). The test `procfs_fails_or_panics_where_these_parsers_do_not`
//!   shows each case.

/// Parses an unsigned decimal number (no sign, no spaces).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// Parses a signed decimal number.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.split_first() {
        Some((b'-', rest)) => parse_u64(rest)
            .and_then(|n| i64::try_from(n).ok())
            .map(|n| -n),
        _ => parse_u64(s).and_then(|n| i64::try_from(n).ok()),
    }
}

/// The first number in a file that holds one value (`energy_uj`,
/// `memory.peak`), ignoring surrounding white space.
pub fn parse_single(s: &[u8]) -> Option<u64> {
    parse_u64(trim(s))
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

fn words(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
}

fn lines(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&b| b == b'\n')
}

/// What the probe takes from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    /// Parent pid (field 4).
    pub ppid: u32,
    /// User time, clock ticks (field 14).
    pub utime: u64,
    /// System time, clock ticks (field 15).
    pub stime: u64,
    /// User time of waited-for children, clock ticks (field 16).
    pub cutime: u64,
    /// System time of waited-for children, clock ticks (field 17).
    pub cstime: u64,
    /// Number of threads (field 20).
    pub threads: u32,
    /// Start time after boot, clock ticks (field 22): with the pid, a key
    /// that survives pid reuse.
    pub starttime: u64,
    /// Resident set size, pages (field 24).
    pub rss_pages: u64,
    /// True for a zombie (state `Z`): its memory is gone.
    pub zombie: bool,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from the last `)`.
pub fn parse_stat(buf: &[u8]) -> Option<Stat> {
    let close = buf.iter().rposition(|&b| b == b')')?;
    let mut st = Stat::default();
    // Field 3 (state) is token 0 after the `)`.
    for (n, w) in words(&buf[close + 1..]).enumerate() {
        match n {
            0 => st.zombie = w == b"Z",
            1 => st.ppid = u32::try_from(parse_u64(w)?).ok()?,
            11 => st.utime = parse_u64(w)?,
            12 => st.stime = parse_u64(w)?,
            13 => st.cutime = parse_i64(w)?.max(0) as u64,
            14 => st.cstime = parse_i64(w)?.max(0) as u64,
            17 => st.threads = u32::try_from(parse_i64(w)?.max(0)).unwrap_or(u32::MAX),
            19 => st.starttime = parse_u64(w)?,
            21 => {
                st.rss_pages = parse_i64(w)?.max(0) as u64;
                return Some(st);
            }
            _ => {}
        }
    }
    None
}

/// The value of a `key: value` or `key value [unit]` line, found by key.
/// Negative values (seen in hand-made fixtures) count as absent.
pub fn find_value(buf: &[u8], key: &[u8]) -> Option<u64> {
    for line in lines(buf) {
        let mut it = words(line);
        let Some(k) = it.next() else { continue };
        let k = k.strip_suffix(b":").unwrap_or(k);
        if k == key {
            return it.next().and_then(parse_u64);
        }
    }
    None
}

/// What the probe takes from `/proc/PID/io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Io {
    /// Bytes really read from storage.
    pub read_bytes: u64,
    /// Bytes really written to storage.
    pub write_bytes: u64,
}

/// Parses `/proc/PID/io`; both `read_bytes` and `write_bytes` must be there.
pub fn parse_io(buf: &[u8]) -> Option<Io> {
    let mut read = None;
    let mut write = None;
    for line in lines(buf) {
        if let Some(v) = line.strip_prefix(b"read_bytes:") {
            read = parse_u64(trim(v));
        } else if let Some(v) = line.strip_prefix(b"write_bytes:") {
            write = parse_u64(trim(v));
        }
    }
    Some(Io {
        read_bytes: read?,
        write_bytes: write?,
    })
}

/// What the probe takes from `/proc/PID/status` (all in kB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// `VmHWM`: peak resident set size.
    pub hwm_kb: Option<u64>,
    /// `VmRSS`.
    pub rss_kb: Option<u64>,
    /// `VmSwap`.
    pub swap_kb: Option<u64>,
}

/// Parses `/proc/PID/status` (lines such as `VmHWM:\t    8028 kB`; empty
/// lines and unknown keys are skipped).
pub fn parse_status(buf: &[u8]) -> Status {
    let mut s = Status::default();
    for line in lines(buf) {
        if !line.starts_with(b"Vm") {
            continue;
        }
        let mut it = words(line);
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        match k {
            b"VmHWM:" => s.hwm_kb = parse_u64(v),
            b"VmRSS:" => s.rss_kb = parse_u64(v),
            b"VmSwap:" => s.swap_kb = parse_u64(v),
            _ => {}
        }
    }
    s
}

/// `Pss` from `/proc/PID/smaps_rollup`, kB.
pub fn parse_smaps_pss(buf: &[u8]) -> Option<u64> {
    find_value(buf, b"Pss")
}

/// `(numa_hit, numa_miss)` from a node's `numastat`.
pub fn parse_numastat(buf: &[u8]) -> Option<(u64, u64)> {
    Some((
        find_value(buf, b"numa_hit")?,
        find_value(buf, b"numa_miss")?,
    ))
}

/// The Lustre client (llite) operations counted as metadata operations.
pub const LUSTRE_META_OPS: [&str; 19] = [
    "open",
    "close",
    "getattr",
    "setattr",
    "statfs",
    "mknod",
    "link",
    "unlink",
    "symlink",
    "mkdir",
    "rmdir",
    "rename",
    "create",
    "truncate",
    "readdir",
    "getxattr",
    "setxattr",
    "listxattr",
    "removexattr",
];

/// Cumulative counters of one llite `stats` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Llite {
    /// Sum of `read_bytes`.
    pub read_bytes: u64,
    /// Sum of `write_bytes`.
    pub write_bytes: u64,
    /// Sum of the sample counts of [`LUSTRE_META_OPS`].
    pub meta_ops: u64,
}

/// Parses an llite `stats` file: `<op> <count> samples [<unit>] [min max sum [sumsq]]`.
/// Header lines (`snapshot_time`, `start_time`, `elapsed_time`) and anything
/// else without `samples` are ignored; a file with only a header gives zeros.
pub fn parse_llite_stats(buf: &[u8]) -> Llite {
    let mut l = Llite::default();
    for line in lines(buf) {
        let mut it = words(line);
        let (Some(name), Some(count), Some(b"samples")) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Some(count) = parse_u64(count) else {
            continue;
        };
        let unit = it.next();
        let nums: [Option<u64>; 3] = [
            it.next().and_then(parse_u64),
            it.next().and_then(parse_u64),
            it.next().and_then(parse_u64),
        ];
        match name {
            b"read_bytes" | b"write_bytes" => {
                // The byte total is the third number (sum) after `[bytes]`.
                if unit != Some(b"[bytes]".as_slice()) {
                    continue;
                }
                let sum = nums[2].unwrap_or(0);
                if name == b"read_bytes" {
                    l.read_bytes = l.read_bytes.saturating_add(sum);
                } else {
                    l.write_bytes = l.write_bytes.saturating_add(sum);
                }
            }
            _ => {
                if LUSTRE_META_OPS.iter().any(|op| op.as_bytes() == name) {
                    l.meta_ops = l.meta_ops.saturating_add(count);
                }
            }
        }
    }
    l
}

/// The increase of a cumulative counter. When it went down: with a known
/// range (RAPL `max_energy_range_uj`) it wrapped, so the increase is
/// `max - prev + cur`; without one it was reset and counts from 0.
pub fn counter_delta(prev: u64, cur: u64, max: Option<u64>) -> u64 {
    if cur >= prev {
        return cur - prev;
    }
    match max {
        Some(m) if m >= prev => m - prev + cur,
        _ => cur,
    }
}

/// Whether `/proc/PID/environ` (NUL-separated) holds `SLURM_JOB_ID=<job>`.
pub fn environ_has_job(buf: &[u8], job: &str) -> bool {
    buf.split(|&b| b == 0).any(|kv| {
        kv.strip_prefix(b"SLURM_JOB_ID=")
            .is_some_and(|v| v == job.as_bytes())
    })
}

/// `(usage, user, system)` in microseconds from a cgroup v2 `cpu.stat`.
pub fn parse_cpu_stat_v2(buf: &[u8]) -> Option<(u64, u64, u64)> {
    Some((
        find_value(buf, b"usage_usec")?,
        find_value(buf, b"user_usec")?,
        find_value(buf, b"system_usec")?,
    ))
}

/// `(user, system)` in USER_HZ ticks from a cgroup v1 `cpuacct.stat`.
pub fn parse_cpuacct_stat(buf: &[u8]) -> Option<(u64, u64)> {
    Some((find_value(buf, b"user")?, find_value(buf, b"system")?))
}

/// What the probe takes from a cgroup's `memory.stat`, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemStat {
    /// Anonymous plus shared (tmpfs, shm) memory: the job's resident
    /// memory without the page cache.
    pub rss: u64,
    /// Page cache: file pages, shared memory left out.
    pub cache: u64,
    /// Swap used, where the file says (v1 `total_swap`; v2 has its own
    /// `memory.swap.current`).
    pub swap: Option<u64>,
}

/// Parses a cgroup `memory.stat`. v2 (`v2` true): `anon` (required),
/// `shmem` and `file` (which includes shmem). v1: the hierarchical
/// `total_rss`, `total_shmem`, `total_cache` (which includes shmem) and
/// `total_swap`, each falling back to the local key (`rss`, ...) when the
/// `total_` one is absent; a kernel without `shmem` (before 4.x) counts 0.
pub fn parse_memory_stat(buf: &[u8], v2: bool) -> Option<MemStat> {
    // [rss, shmem, cache, swap]: (total_ value, local value).
    let mut v: [(Option<u64>, Option<u64>); 4] = [(None, None); 4];
    let keys: [&[u8]; 4] = if v2 {
        [b"anon", b"shmem", b"file", b"-"]
    } else {
        [b"rss", b"shmem", b"cache", b"swap"]
    };
    for line in lines(buf) {
        let mut it = words(line);
        let (Some(k), Some(n)) = (it.next(), it.next()) else {
            continue;
        };
        let (total, k) = match k.strip_prefix(b"total_") {
            Some(rest) if !v2 => (true, rest),
            _ => (false, k),
        };
        if let Some(i) = keys.iter().position(|&want| want == k) {
            let slot = if total { &mut v[i].0 } else { &mut v[i].1 };
            *slot = parse_u64(n);
        }
    }
    let get = |i: usize| v[i].0.or(v[i].1);
    let anon = get(0)?;
    let shmem = get(1).unwrap_or(0);
    Some(MemStat {
        rss: anon.saturating_add(shmem),
        cache: get(2).unwrap_or(0).saturating_sub(shmem),
        swap: get(3),
    })
}

/// Bytes read and written, summed over the devices of a cgroup v2
/// `io.stat` (`MAJ:MIN rbytes=N wbytes=N rios=N ...`). An empty file (no
/// I/O yet) gives zeros.
pub fn parse_io_stat(buf: &[u8]) -> (u64, u64) {
    let (mut r, mut w) = (0u64, 0u64);
    for line in lines(buf) {
        for kv in words(line).skip(1) {
            if let Some(n) = kv.strip_prefix(b"rbytes=").and_then(parse_u64) {
                r = r.saturating_add(n);
            } else if let Some(n) = kv.strip_prefix(b"wbytes=").and_then(parse_u64) {
                w = w.saturating_add(n);
            }
        }
    }
    (r, w)
}

/// Bytes read and written, summed over the devices of a cgroup v1
/// `blkio.*io_service_bytes*` file (`MAJ:MIN Read N`, `MAJ:MIN Write N`,
/// ..., a last `Total N`).
pub fn parse_blkio_bytes(buf: &[u8]) -> (u64, u64) {
    let (mut r, mut w) = (0u64, 0u64);
    for line in lines(buf) {
        let mut it = words(line);
        let (Some(dev), Some(op), Some(n)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !dev.contains(&b':') {
            continue;
        }
        match (op, parse_u64(n)) {
            (b"Read", Some(n)) => r = r.saturating_add(n),
            (b"Write", Some(n)) => w = w.saturating_add(n),
            _ => {}
        }
    }
    (r, w)
}

/// The pids in a `cgroup.procs` or `tasks` file, one per line.
pub fn parse_pid_list(buf: &[u8], out: &mut Vec<u32>) {
    for line in lines(buf) {
        if let Some(p) = parse_u64(trim(line)).and_then(|p| u32::try_from(p).ok()) {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parentheses_in_the_name() {
        let line = b"4242 (my (odd) prog) 1) S 17 4242 17 0 -1 4194304 100 0 0 0 250 31 7 3 20 0 4 0 987654 1000000 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.ppid, 17);
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (250, 31, 7, 3));
        assert_eq!(s.threads, 4);
        assert_eq!(s.starttime, 987654);
        assert_eq!(s.rss_pages, 2560);
        assert!(!s.zombie);
    }

    #[test]
    fn stat_of_the_procfs_fixture_and_a_zombie() {
        let line = b"26231 (vim) R 5392 7446 5392 34835 7446 4218880 32533 309516 26 82 1677 44 158 99 20 0 1 0 82375 56274944 1981 18446744073709551615 4194304 6294284";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (1677, 44, 158, 99));
        assert_eq!((s.threads, s.starttime, s.rss_pages), (1, 82375, 1981));
        let z = b"7 (x) Z 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 99 0 0 0";
        let z = parse_stat(z).unwrap();
        assert!(z.zombie);
        assert_eq!((z.utime, z.stime, z.rss_pages), (5, 6, 0));
    }

    #[test]
    fn stat_truncated_or_garbage_is_none() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"1 (a) S 0 1 1"), None);
        assert_eq!(parse_stat(b"1 a S 0"), None);
        assert_eq!(
            parse_stat(b"1 (a) S x 1 1 0 0 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0"),
            None
        );
    }

    #[test]
    fn io_file_with_negative_cancelled_bytes() {
        let text = b"rchar: 750339\nwchar: 818609\nsyscr: 7405\nsyscw: 5245\nread_bytes: 1024\nwrite_bytes: 2048\ncancelled_write_bytes: -1024\n";
        assert_eq!(
            parse_io(text),
            Some(Io {
                read_bytes: 1024,
                write_bytes: 2048
            })
        );
        assert_eq!(parse_io(b"rchar: 1\n"), None);
        assert_eq!(parse_io(b""), None);
    }

    #[test]
    fn status_with_leading_empty_line_and_missing_keys() {
        let text = b"\nName:\tprometheus\nVmPeak:\t   58472 kB\nVmHWM:\t    8028 kB\nVmRSS:\t    6716 kB\nThreads:\t1\n";
        let s = parse_status(text);
        assert_eq!(s.hwm_kb, Some(8028));
        assert_eq!(s.rss_kb, Some(6716));
        assert_eq!(s.swap_kb, None);
        let s = parse_status(b"VmSwap:\t 12 kB\r\nVmHWM:");
        assert_eq!(s.swap_kb, Some(12));
        assert_eq!(s.hwm_kb, None);
        assert_eq!(parse_status(b""), Status::default());
    }

    #[test]
    fn smaps_rollup_pss() {
        let text = b"00400000-7fff [rollup]\nRss:               29948 kB\nPss:               29944 kB\nPss_Anon:  1 kB\nSwap:  1940 kB\n";
        assert_eq!(parse_smaps_pss(text), Some(29944));
        assert_eq!(parse_smaps_pss(b"Rss: 1 kB\n"), None);
    }

    #[test]
    fn numastat_hit_and_miss() {
        let text = b"numa_hit 193460335812\nnuma_miss 12624528\nnuma_foreign 59858623300\ninterleave_hit 57146\nlocal_node 193454780853\nother_node 18179487\n";
        assert_eq!(parse_numastat(text), Some((193460335812, 12624528)));
        assert_eq!(parse_numastat(b"numa_hit 5\n"), None);
    }

    #[test]
    fn llite_stats_old_format_with_regs() {
        let text = b"snapshot_time             1510950459.772792457 secs.nsecs\nread_bytes                1 samples [bytes] 4194304 4194304 4194304\nwrite_bytes               89467810 samples [bytes] 4096 1048576 93813797294080\nopen                      136 samples [regs]\nclose                     96 samples [regs]\nreaddir                   12 samples [regs]\ntruncate                  134 samples [regs]\ngetattr                   41 samples [regs]\nalloc_inode               2 samples [regs]\ngetxattr                  85 samples [regs]\ngetxattr_hits             20 samples [regs]\nremovexattr               134 samples [regs]\ninode_permission          398 samples [regs]\n";
        let l = parse_llite_stats(text);
        assert_eq!(l.read_bytes, 4194304);
        assert_eq!(l.write_bytes, 93813797294080);
        assert_eq!(l.meta_ops, 136 + 96 + 12 + 134 + 41 + 85 + 134);
    }

    #[test]
    fn llite_stats_new_format_with_four_numbers_and_headers() {
        let text = b"snapshot_time             1700000000.000000001 secs.nsecs\nstart_time                1690000000.000000001 secs.nsecs\nelapsed_time              10000000.0 secs.nsecs\nread_bytes                10 samples [bytes] 4096 1048576 5000000 99999999999\nwrite_bytes               3 samples [bytes] 1 2 300\nopen                      7 samples [usecs] 1 20 50 900\nsetattr                   2 samples [reqs]\nstatfs                    1 samples [usecs] 3 3 3 9\nmystery_header v2\nfuture_op                 9 samples [reqs]\n";
        let l = parse_llite_stats(text);
        assert_eq!(l.read_bytes, 5000000);
        assert_eq!(l.write_bytes, 300);
        assert_eq!(l.meta_ops, 10);
    }

    #[test]
    fn llite_read_ahead_stats_holds_only_a_header() {
        let l = parse_llite_stats(b"snapshot_time             1510950459.776359249 secs.nsecs\n");
        assert_eq!(l, Llite::default());
        assert_eq!(parse_llite_stats(b""), Llite::default());
    }

    #[test]
    fn rapl_wrap_around_and_resets() {
        let max = 262143328850;
        let first = 240422366267;
        assert_eq!(counter_delta(first, first + 5, Some(max)), 5);
        assert_eq!(
            counter_delta(first, 1000, Some(max)),
            max - first + 1000,
            "wrapped past max_energy_range_uj"
        );
        assert_eq!(counter_delta(100, 40, None), 40, "reset counts from 0");
        assert_eq!(counter_delta(7, 7, None), 0);
        assert_eq!(parse_single(b"240422366267\n"), Some(240422366267));
        assert_eq!(parse_single(b"  \n"), None);
        assert_eq!(parse_single(b"max\n"), None);
    }

    #[test]
    fn environ_search_needs_an_exact_value() {
        let env = b"HOME=/root\0SLURM_JOB_ID=42\0PATH=/bin\0";
        assert!(environ_has_job(env, "42"));
        assert!(!environ_has_job(env, "4"));
        assert!(!environ_has_job(b"XSLURM_JOB_ID=42\0", "42"));
        assert!(environ_has_job(b"SLURM_JOB_ID=42", "42"));
    }

    #[test]
    fn cgroup_cpu_counters() {
        let v2 =
            b"usage_usec 3611347518\nuser_usec 2458134730\nsystem_usec 1153212788\nnr_periods 0\n";
        assert_eq!(
            parse_cpu_stat_v2(v2),
            Some((3611347518, 2458134730, 1153212788))
        );
        assert_eq!(
            parse_cpuacct_stat(b"user 6195\nsystem 773\n"),
            Some((6195, 773))
        );
        let mut pids = Vec::new();
        parse_pid_list(b"12\n13\n\nx\n14", &mut pids);
        assert_eq!(pids, vec![12, 13, 14]);
    }

    /// Why the probe keeps these parsers rather than the `procfs` crate's
    /// (see the module doc): on input the probe must survive, procfs's
    /// `Stat` and `Io` fail where these give values, or panic (which in a
    /// release build, `panic = "abort"`, would end the probe).
    #[test]
    fn procfs_fails_or_panics_where_these_parsers_do_not() {
        use procfs::process::{Io as PIo, Stat as PStat};
        use procfs::FromRead;
        // The procfs fixture's stat has 26 fields; procfs wants 35.
        let short = b"26231 (vim) R 5392 7446 5392 34835 7446 4218880 32533 309516 26 82 1677 44 158 99 20 0 1 0 82375 56274944 1981 18446744073709551615 4194304 6294284";
        assert!(parse_stat(short).is_some());
        assert!(PStat::from_read(&short[..]).is_err());
        // A negative cancelled_write_bytes loses the whole io reading.
        let io = b"rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 1024\nwrite_bytes: 2048\ncancelled_write_bytes: -1024\n";
        assert!(parse_io(io).is_some());
        assert!(PIo::from_read(&io[..]).is_err());
        // Text cut right after the name, and a key that is not ASCII.
        let cut = b"1 (x)";
        assert_eq!(parse_stat(cut), None);
        assert!(std::panic::catch_unwind(|| PStat::from_read(&cut[..])).is_err());
        let odd = "\u{e9} 5\nread_bytes: 1\nwrite_bytes: 2\n".as_bytes();
        assert!(parse_io(odd).is_some());
        assert!(std::panic::catch_unwind(|| PIo::from_read(odd)).is_err());
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(find_value(b"a 1\nb: 2 kB\n", b"b"), Some(2));
    }

    #[test]
    fn memory_stat_v1_prefers_hierarchical_totals_and_splits_shmem() {
        // The job's processes sit two levels down: local keys are 0.
        let v1 = b"cache 0\nrss 0\nshmem 0\nswap 0\ntotal_cache 12963840\ntotal_rss 38555648\ntotal_rss_huge 999\ntotal_shmem 4194304\ntotal_mapped_file 143360\ntotal_swap 0\n";
        let m = parse_memory_stat(v1, false).unwrap();
        assert_eq!(m.rss, 38555648 + 4194304);
        assert_eq!(m.cache, 12963840 - 4194304);
        assert_eq!(m.swap, Some(0));
        // An old kernel: local keys only, no shmem, no swap accounting.
        let old = b"cache 65101824\nrss 230662144\nrss_huge 174063616\nmapped_file 17633280\n";
        let m = parse_memory_stat(old, false).unwrap();
        assert_eq!((m.rss, m.cache, m.swap), (230662144, 65101824, None));
        assert_eq!(parse_memory_stat(b"cache 1\n", false), None, "no rss");
        // v2 names: anon, shmem, file (file includes shmem); no total_.
        let v2 =
            b"anon 1411100672\nfile 8621432832\nkernel 195010560\nshmem 20480\nfile_mapped 5\n";
        let m = parse_memory_stat(v2, true).unwrap();
        assert_eq!(m.rss, 1411100672 + 20480);
        assert_eq!(m.cache, 8621432832 - 20480);
        assert_eq!(m.swap, None);
        assert_eq!(parse_memory_stat(b"file 5\n", true), None);
        assert_eq!(parse_memory_stat(b"", true), None);
    }

    #[test]
    fn io_stat_and_blkio_sum_the_devices() {
        let io = b"8:0 rbytes=90112 wbytes=4096 rios=3 wios=1 dbytes=0 dios=0\n259:0 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n";
        assert_eq!(parse_io_stat(io), (90122, 4116));
        assert_eq!(parse_io_stat(b""), (0, 0), "no I/O yet");
        assert_eq!(parse_io_stat(b"8:0 rbytes=x wbytes=7\n"), (0, 7));
        let blk = b"8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 8192\n8:0 Async 4096\n8:0 Discard 0\n8:0 Total 12288\n8:16 Read 1\n8:16 Write 2\nTotal 12291\n";
        assert_eq!(parse_blkio_bytes(blk), (4097, 8194));
        assert_eq!(parse_blkio_bytes(b"Total 0\n"), (0, 0));
    }
}
