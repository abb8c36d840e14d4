//! The sampler: finds the watched processes, reads their /proc files into a
//! reused buffer and turns two readings into a `sample` record.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use hpc_core::num::round6;
use hpc_core::record::Sample;

use crate::cgroup::{self, CgCounters, JobCgroup};
use crate::gpu::Gpus;
use crate::node::{NodeReading, NodeSources};
use crate::parse::{self, Io};
use crate::perf::{PerfSet, PerfValues};

/// What the sampler watches.
#[derive(Debug, Clone)]
pub enum Watch {
    /// A SLURM job: its cgroup when one was found, else the processes
    /// whose environment holds `SLURM_JOB_ID=<id>`.
    Job {
        /// The job id.
        id: String,
        /// The job's cgroup.
        cgroup: Option<JobCgroup>,
    },
    /// A process and all its descendants.
    Pid(u32),
}

/// Fixed settings of a sampler.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `/proc` root.
    pub proc_root: PathBuf,
    /// What to watch.
    pub watch: Watch,
    /// Read `smaps_rollup` for PSS.
    pub pss: bool,
    /// Open hardware counters on each process.
    pub perf: bool,
    /// Allocated CPUs, for `cpu_frac`.
    pub cpus: Option<u32>,
    /// Clock ticks per second (`/proc` CPU times).
    pub clk_tck: f64,
    /// Page size in bytes.
    pub page_size: u64,
    /// A pid never watched (the probe itself).
    pub self_pid: u32,
    /// Host name written on each sample.
    pub host: Option<String>,
    /// Job id written on each sample.
    pub job_id: Option<String>,
}

/// Read `status` for VmHWM/VmSwap at most every this many samples per
/// process (and whenever RSS passes the last known peak).
const STATUS_EVERY: u64 = 10;
/// Open hardware counters on at most this many processes.
const PERF_MAX_PROCS: usize = 256;
const MB: f64 = 1024.0 * 1024.0;

struct Tracked {
    ppid: u32,
    user: u64,
    sys: u64,
    rss_pages: u64,
    threads: u32,
    hwm_kb: u64,
    swap_kb: u64,
    status_gen: u64,
    io: Option<Io>,
    pss_kb: Option<u64>,
    seen: u64,
    perf: Option<PerfSet>,
    perf_last: PerfValues,
}

struct Prev {
    mono: f64,
    cpu_s: f64,
    read_b: u64,
    write_b: u64,
    node: NodeReading,
}

/// The state kept from one sample to the next.
pub struct Sampler {
    cfg: Config,
    node: NodeSources,
    procs: HashMap<(u32, u64), Tracked>,
    root_start: Option<u64>,
    dead_user: u64,
    dead_sys: u64,
    dead_read: u64,
    dead_write: u64,
    gen: u64,
    buf: Vec<u8>,
    path: String,
    pids: Vec<u32>,
    accepted: HashSet<u32>,
    environ_seen: HashMap<(u32, u64), bool>,
    io_denied_said: bool,
    perf_failed: bool,
    prev: Option<Prev>,
    out_user: f64,
    out_sys: f64,
    out_read: u64,
    out_write: u64,
    hwm_mb: f64,
    energy_j: f64,
    seen_any: bool,
    io_seen: bool,
    cg_peak: bool,
    cg_swap: bool,
    last_count: usize,
    cgroup_gone: bool,
    gpus: Option<Gpus>,
}

/// Reads a whole file into `buf` (cleared first) without the extra
/// `fstat`/`lseek` calls of `read_to_end`. False when it cannot be opened
/// or read (a vanished process, a permission error).
pub fn read_into(path: &std::path::Path, buf: &mut Vec<u8>) -> bool {
    read_file(path, buf).is_ok()
}

/// Like [`read_into`], with the error.
pub fn read_file(path: &std::path::Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    buf.clear();
    let mut f = std::fs::File::open(path)?;
    loop {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(4096);
        }
        let start = buf.len();
        let cap = buf.capacity();
        buf.resize(cap, 0);
        match f.read(&mut buf[start..]) {
            Ok(0) => {
                buf.truncate(start);
                return Ok(());
            }
            Ok(n) => buf.truncate(start + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(start),
            Err(e) => {
                buf.truncate(start);
                return Err(e);
            }
        }
    }
}

impl Sampler {
    /// A sampler with its node-level sources already found.
    pub fn new(cfg: Config, node: NodeSources) -> Self {
        let cap = cfg.proc_root.as_os_str().len() + 64;
        Sampler {
            cfg,
            node,
            procs: HashMap::new(),
            root_start: None,
            dead_user: 0,
            dead_sys: 0,
            dead_read: 0,
            dead_write: 0,
            gen: 0,
            buf: Vec::with_capacity(8192),
            path: String::with_capacity(cap),
            pids: Vec::new(),
            accepted: HashSet::new(),
            environ_seen: HashMap::new(),
            io_denied_said: false,
            perf_failed: false,
            prev: None,
            out_user: 0.0,
            out_sys: 0.0,
            out_read: 0,
            out_write: 0,
            hwm_mb: 0.0,
            energy_j: 0.0,
            seen_any: false,
            io_seen: false,
            cg_peak: false,
            cg_swap: false,
            last_count: 0,
            cgroup_gone: false,
            gpus: None,
        }
    }

    fn set_path(&mut self, pid: u32, file: &str) {
        self.path.clear();
        self.path
            .push_str(self.cfg.proc_root.to_str().unwrap_or("/proc"));
        let _ = write!(self.path, "/{pid}/{file}");
    }

    fn read_proc(&mut self, pid: u32, file: &str) -> bool {
        self.set_path(pid, file);
        read_into(std::path::Path::new(&self.path), &mut self.buf)
    }

    fn read_stat(&mut self, pid: u32) -> Option<parse::Stat> {
        if !self.read_proc(pid, "stat") {
            return None;
        }
        parse::parse_stat(&self.buf)
    }

    /// Looks for the watched processes without taking a sample (no rate
    /// baseline is set): how many there are now.
    pub fn find_processes(&mut self) -> usize {
        self.collect();
        let n = self.procs.len();
        self.seen_any |= n > 0;
        n
    }

    /// The number of processes found by the last sample.
    pub fn process_count(&self) -> usize {
        self.last_count
    }

    /// Whether any process was ever found.
    pub fn seen_any(&self) -> bool {
        self.seen_any
    }

    /// Reads these GPUs with each sample from now on.
    pub fn set_gpus(&mut self, gpus: Option<Gpus>) {
        self.gpus = gpus;
    }

    /// The per-GPU records of the last sample (none without GPUs).
    pub fn gpu_records(&self) -> &[hpc_core::record::Gpu] {
        self.gpus.as_ref().map_or(&[], Gpus::records)
    }

    /// Whether the job cgroup was found and has since been removed.
    pub fn cgroup_gone(&self) -> bool {
        self.cgroup_gone
    }

    /// For a command the probe ran and reaped: its whole CPU use (itself
    /// and every child it waited for), from `getrusage(RUSAGE_CHILDREN)`,
    /// so the last interval before it exited is not lost.
    pub fn root_reaped(&mut self, user_s: f64, sys_s: f64) {
        let Watch::Pid(root) = self.cfg.watch else {
            return;
        };
        let Some(start) = self.root_start else {
            // Never seen alive: all of its CPU goes to the dead total.
            self.dead_user = self
                .dead_user
                .saturating_add((user_s * self.cfg.clk_tck).round() as u64);
            self.dead_sys = self
                .dead_sys
                .saturating_add((sys_s * self.cfg.clk_tck).round() as u64);
            return;
        };
        if let Some(t) = self.procs.get_mut(&(root, start)) {
            t.user = t.user.max((user_s * self.cfg.clk_tck).round() as u64);
            t.sys = t.sys.max((sys_s * self.cfg.clk_tck).round() as u64);
        }
    }

    /// Finds the pids that belong to the watched set this round and tracks
    /// each one (stat read included).
    fn collect(&mut self) {
        self.accepted.clear();
        match self.cfg.watch.clone() {
            Watch::Pid(root) => self.collect_tree(root),
            Watch::Job { id, cgroup } => {
                let mut pids = std::mem::take(&mut self.pids);
                pids.clear();
                let mut listed = false;
                if let Some(cg) = &cgroup {
                    if cg.list_pids(&mut self.buf, &mut pids) {
                        listed = true;
                    } else {
                        self.cgroup_gone = true;
                    }
                }
                if listed {
                    for &pid in &pids {
                        if pid == self.cfg.self_pid {
                            continue;
                        }
                        if let Some(st) = self.read_stat(pid) {
                            self.track((pid, st.starttime), &st);
                        }
                    }
                } else if cgroup.is_none() {
                    self.collect_by_environ(&id, &mut pids);
                }
                self.pids = pids;
            }
        }
    }

    /// Tracks `root` and its descendants: the known processes are looked
    /// at again (a reparented one stays watched), the children found
    /// through each thread's `children` file. A pid whose start time
    /// changed is another process.
    fn collect_tree(&mut self, root: u32) {
        let mut frontier: Vec<u32> = vec![root];
        frontier.extend(self.procs.keys().map(|k| k.0));
        let initial = frontier.len();
        let mut visited: HashSet<u32> = HashSet::with_capacity(frontier.len() * 2);
        let mut i = 0;
        while i < frontier.len() {
            let pid = frontier[i];
            let via_child = i >= initial;
            i += 1;
            if !visited.insert(pid) || pid == self.cfg.self_pid {
                continue;
            }
            let Some(st) = self.read_stat(pid) else {
                continue;
            };
            let key = (pid, st.starttime);
            let ok = if pid == root {
                match self.root_start {
                    None => {
                        self.root_start = Some(st.starttime);
                        true
                    }
                    Some(s) => s == st.starttime,
                }
            } else {
                self.procs.contains_key(&key) || via_child || self.accepted.contains(&st.ppid)
            };
            if !ok {
                continue;
            }
            self.track(key, &st);
            self.children_of(pid, st.threads, &mut frontier);
        }
    }

    /// A job without a cgroup: tracks every process under the /proc root
    /// whose environment holds `SLURM_JOB_ID=<id>` (read once per process).
    fn collect_by_environ(&mut self, id: &str, pids: &mut Vec<u32>) {
        list_proc_pids(&self.cfg.proc_root, pids);
        for &pid in pids.iter() {
            if pid == self.cfg.self_pid {
                continue;
            }
            let Some(st) = self.read_stat(pid) else {
                continue;
            };
            let key = (pid, st.starttime);
            let known = match self.environ_seen.get(&key) {
                Some(&b) => b,
                None => {
                    let b = self.read_proc(pid, "environ") && parse::environ_has_job(&self.buf, id);
                    self.environ_seen.insert(key, b);
                    b
                }
            };
            if known {
                self.track(key, &st);
            }
        }
        self.environ_seen
            .retain(|k, _| pids.binary_search(&k.0).is_ok());
    }

    fn children_of(&mut self, pid: u32, threads: u32, frontier: &mut Vec<u32>) {
        let mut tids: Vec<u32> = vec![pid];
        if threads > 1 {
            self.set_path(pid, "task");
            if let Ok(rd) = std::fs::read_dir(&self.path) {
                tids = rd
                    .flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                    .collect();
            }
        }
        for tid in tids {
            self.path.clear();
            self.path
                .push_str(self.cfg.proc_root.to_str().unwrap_or("/proc"));
            let _ = write!(self.path, "/{pid}/task/{tid}/children");
            if read_into(std::path::Path::new(&self.path), &mut self.buf) {
                for w in self.buf.split(|b| b.is_ascii_whitespace()) {
                    if let Some(c) = parse::parse_u64(w).and_then(|c| u32::try_from(c).ok()) {
                        frontier.push(c);
                    }
                }
            }
        }
    }

    /// Updates (or starts) the record of one watched process from its
    /// `stat` and, as due, its `status`, `io` and `smaps_rollup`.
    fn track(&mut self, key: (u32, u64), st: &parse::Stat) {
        let gen = self.gen;
        self.accepted.insert(key.0);
        let new = !self.procs.contains_key(&key);
        if new {
            self.start_tracking(key, st);
        }
        let status = self.read_status_if_due(key, st, new);
        let io = self.read_io(key.0);
        let pss = if self.cfg.pss && !st.zombie && self.read_proc(key.0, "smaps_rollup") {
            parse::parse_smaps_pss(&self.buf)
        } else {
            None
        };
        let page = self.cfg.page_size;
        let t = self.procs.get_mut(&key).expect("inserted above");
        t.ppid = st.ppid;
        // Cumulative CPU never goes down for one process.
        t.user = t.user.max(st.utime.saturating_add(st.cutime));
        t.sys = t.sys.max(st.stime.saturating_add(st.cstime));
        t.rss_pages = if st.zombie { 0 } else { st.rss_pages };
        t.threads = st.threads;
        t.seen = gen;
        if let Some(s) = status {
            t.status_gen = gen;
            if let Some(h) = s.hwm_kb {
                t.hwm_kb = t.hwm_kb.max(h);
            }
            t.swap_kb = s.swap_kb.unwrap_or(0);
        }
        t.hwm_kb = t.hwm_kb.max(t.rss_pages.saturating_mul(page) / 1024);
        if let Some(io) = io {
            let old = t.io.unwrap_or_default();
            t.io = Some(Io {
                read_bytes: old.read_bytes.max(io.read_bytes),
                write_bytes: old.write_bytes.max(io.write_bytes),
            });
        }
        t.pss_kb = pss;
    }

    /// A new process: an empty record, with hardware counters opened on it
    /// while there are few enough.
    fn start_tracking(&mut self, key: (u32, u64), st: &parse::Stat) {
        let perf = if self.cfg.perf && !self.perf_failed && self.procs.len() < PERF_MAX_PROCS {
            PerfSet::open(key.0 as i32).ok()
        } else {
            None
        };
        self.procs.insert(
            key,
            Tracked {
                ppid: st.ppid,
                user: 0,
                sys: 0,
                rss_pages: 0,
                threads: 0,
                hwm_kb: 0,
                swap_kb: 0,
                status_gen: 0,
                io: None,
                pss_kb: None,
                seen: self.gen,
                perf,
                perf_last: PerfValues::default(),
            },
        );
    }

    /// `status` is read for VmHWM and VmSwap: not at all when the cgroup
    /// gives both, else for new processes, every STATUS_EVERY samples,
    /// and (without a cgroup peak) when RSS passes the known peak.
    fn read_status_if_due(
        &mut self,
        key: (u32, u64),
        st: &parse::Stat,
        new: bool,
    ) -> Option<parse::Status> {
        let need_status = !(self.cg_peak && self.cg_swap) && {
            let t = &self.procs[&key];
            let rss_kb = st.rss_pages.saturating_mul(self.cfg.page_size) / 1024;
            new || (!self.cg_peak && rss_kb > t.hwm_kb) || self.gen >= t.status_gen + STATUS_EVERY
        };
        if need_status && !st.zombie && self.read_proc(key.0, "status") {
            Some(parse::parse_status(&self.buf))
        } else {
            None
        }
    }

    /// The process's `io`; a permission error is said once per run.
    fn read_io(&mut self, pid: u32) -> Option<Io> {
        self.set_path(pid, "io");
        let io_read = read_file(std::path::Path::new(&self.path), &mut self.buf);
        if io_read.is_ok() {
            return parse::parse_io(&self.buf);
        }
        if !self.io_denied_said
            && io_read.is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        {
            self.io_denied_said = true;
            hpc_core::note!(
                "hpc-probe: cannot read {}: permission denied; disk fields cover only readable processes",
                self.path
            );
        }
        None
    }

    /// Takes one sample at wall time `t` (Unix seconds) and monotonic time
    /// `mono` (seconds).
    pub fn sample(&mut self, t: f64, mono: f64, cg_counters: Option<CgCounters>) -> Sample {
        self.gen += 1;
        self.cg_peak = cg_counters.is_some_and(|c| c.peak_bytes.is_some());
        self.cg_swap = cg_counters.is_some_and(|c| c.swap_bytes.is_some());
        self.collect();
        self.retire_gone();
        let mut s = Sample {
            t,
            host: self.cfg.host.clone(),
            job_id: self.cfg.job_id.clone(),
            ..Default::default()
        };
        let n = self.procs.len();
        self.last_count = n;
        if n > 0 {
            self.seen_any = true;
        }
        let sum = self.sum_procs();
        s.procs = Some(n as u32);
        let cpu_total = self.put_cpu_and_memory(&mut s, &sum, cg_counters.unwrap_or_default());
        let any_io = self.put_io(&mut s, &sum);
        put_perf(&mut s, &sum.perf);
        if let Some(g) = &mut self.gpus {
            g.read_into(&mut s, &self.accepted);
        }
        let node_now = self.node.read(&mut self.buf);
        if !self.node.rapl.is_empty() {
            s.energy_j = Some(round3(self.energy_j));
        }
        if let Some(p) = &self.prev {
            let dt = mono - p.mono;
            if dt > 0.0 {
                self.put_rates(&mut s, cpu_total, any_io, &node_now, dt);
            }
        }
        self.prev = Some(Prev {
            mono,
            cpu_s: cpu_total.max(self.prev.as_ref().map_or(0.0, |p| p.cpu_s)),
            read_b: self.out_read,
            write_b: self.out_write,
            node: node_now,
        });
        s
    }

    /// Processes gone since the last round: their last CPU and I/O move
    /// to the dead totals, unless their parent is still watched (the
    /// parent's cutime/cstime and io take them over when it reaps them).
    fn retire_gone(&mut self) {
        let gen = self.gen;
        let gone: Vec<(u32, u64)> = self
            .procs
            .iter()
            .filter(|(_, v)| v.seen != gen)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            if let Some(v) = self.procs.remove(&k) {
                if !self.accepted.contains(&v.ppid) {
                    self.dead_user = self.dead_user.saturating_add(v.user);
                    self.dead_sys = self.dead_sys.saturating_add(v.sys);
                    if let Some(io) = v.io {
                        self.dead_read = self.dead_read.saturating_add(io.read_bytes);
                        self.dead_write = self.dead_write.saturating_add(io.write_bytes);
                    }
                }
            }
        }
    }

    /// Sums the watched processes' counters (I/O with the dead totals) and
    /// their hardware counters' increments since the last round.
    fn sum_procs(&mut self) -> ProcSums {
        let mut m = ProcSums {
            read: self.dead_read,
            write: self.dead_write,
            any_io: self.dead_read > 0 || self.dead_write > 0,
            ..Default::default()
        };
        // Counters from /proc are summed saturating: a bogus value near
        // u64::MAX gives a huge figure, never an overflow.
        let add = |sum: &mut u64, v: u64| *sum = sum.saturating_add(v);
        for v in self.procs.values_mut() {
            add(&mut m.user, v.user);
            add(&mut m.sys, v.sys);
            add(&mut m.rss_pages, v.rss_pages);
            add(&mut m.hwm_kb, v.hwm_kb);
            add(&mut m.swap_kb, v.swap_kb);
            add(&mut m.threads, u64::from(v.threads));
            if let Some(io) = v.io {
                m.any_io = true;
                add(&mut m.read, io.read_bytes);
                add(&mut m.write, io.write_bytes);
            }
            if let Some(p) = v.pss_kb {
                add(m.pss_kb.get_or_insert(0), p);
            }
            if let Some(pv) = v.perf.as_ref().and_then(PerfSet::read) {
                let d = m.perf.get_or_insert_with(PerfValues::default);
                let l = &v.perf_last;
                add(&mut d.cycles, pv.cycles.saturating_sub(l.cycles));
                add(
                    &mut d.instructions,
                    pv.instructions.saturating_sub(l.instructions),
                );
                add(
                    &mut d.cache_refs,
                    pv.cache_refs.saturating_sub(l.cache_refs),
                );
                add(
                    &mut d.cache_misses,
                    pv.cache_misses.saturating_sub(l.cache_misses),
                );
                v.perf_last = pv;
            }
        }
        m
    }

    /// Fills the CPU times, thread count and memory of `s`, the cgroup's
    /// counters taking precedence; returns the CPU seconds the busy cores
    /// are derived from.
    fn put_cpu_and_memory(&mut self, s: &mut Sample, sum: &ProcSums, cg: CgCounters) -> f64 {
        let tck = self.cfg.clk_tck;
        let page = self.cfg.page_size as f64;
        let mut user_s = sum.user.saturating_add(self.dead_user) as f64 / tck;
        let mut sys_s = sum.sys.saturating_add(self.dead_sys) as f64 / tck;
        let mut cpu_total = user_s + sys_s;
        if let (Some(u), Some(sy)) = (cg.user_s, cg.sys_s) {
            user_s = u;
            sys_s = sy;
            cpu_total = u + sy;
        }
        if let Some(c) = cg.cpu_s {
            cpu_total = c;
        }
        // Reported cumulative values never go backwards.
        self.out_user = self.out_user.max(user_s);
        self.out_sys = self.out_sys.max(sys_s);
        s.cpu_user_s = Some(round3(self.out_user));
        s.cpu_sys_s = Some(round3(self.out_sys));
        s.threads = Some(sum.threads.min(u64::from(u32::MAX)) as u32);
        let rss_mb = sum.rss_pages as f64 * page / MB;
        s.rss_mb = Some(round3(rss_mb));
        let hwm_now = match cg.peak_bytes {
            Some(p) => p as f64 / MB,
            None => sum.hwm_kb as f64 / 1024.0,
        };
        self.hwm_mb = self.hwm_mb.max(hwm_now).max(rss_mb);
        s.hwm_mb = Some(round3(self.hwm_mb));
        s.swap_mb = Some(round3(match cg.swap_bytes {
            Some(b) => b as f64 / MB,
            None => sum.swap_kb as f64 / 1024.0,
        }));
        s.pss_mb = sum.pss_kb.map(|p| round3(p as f64 / 1024.0));
        cpu_total
    }

    /// Fills the cumulative I/O of `s`, once any process has shown I/O;
    /// returns whether one has.
    fn put_io(&mut self, s: &mut Sample, sum: &ProcSums) -> bool {
        let any_io = sum.any_io || self.io_seen;
        self.io_seen = any_io;
        if any_io {
            self.out_read = self.out_read.max(sum.read);
            self.out_write = self.out_write.max(sum.write);
            s.read_mb = Some(round3(self.out_read as f64 / MB));
            s.write_mb = Some(round3(self.out_write as f64 / MB));
        }
        any_io
    }

    /// Fills the rates of `s` over the `dt` seconds since the last sample:
    /// busy cores, I/O and the node's counters.
    fn put_rates(
        &mut self,
        s: &mut Sample,
        cpu_total: f64,
        any_io: bool,
        node_now: &NodeReading,
        dt: f64,
    ) {
        let Some(p) = &self.prev else {
            return;
        };
        let cores = (cpu_total - p.cpu_s).max(0.0) / dt;
        s.cpu_cores = Some(round3(cores));
        if let Some(c) = self.cfg.cpus.filter(|&c| c > 0) {
            s.cpu_frac = Some(round3(cores / f64::from(c)));
        }
        if any_io {
            s.read_mbps = Some(round3(
                self.out_read.saturating_sub(p.read_b) as f64 / MB / dt,
            ));
            s.write_mbps = Some(round3(
                self.out_write.saturating_sub(p.write_b) as f64 / MB / dt,
            ));
        }
        let r = self.node.rates(&p.node, node_now, dt);
        s.numa_miss_rate = r.numa_miss_rate.map(round6);
        s.lustre_read_mbps = r.lustre_read_mbps.map(round3);
        s.lustre_write_mbps = r.lustre_write_mbps.map(round3);
        s.lustre_meta_ops = r.lustre_meta_ops.map(round3);
        if let Some(e) = r.energy_j {
            self.energy_j += e;
            s.energy_j = Some(round3(self.energy_j));
        }
        s.power_w = r.power_w.map(round3);
        s.ib_rx_mbps = r.ib_rx_mbps.map(round3);
        s.ib_tx_mbps = r.ib_tx_mbps.map(round3);
    }

    /// Reads the job cgroup's counters, when the sampler watches one.
    pub fn cgroup_counters(&mut self) -> Option<CgCounters> {
        let Watch::Job {
            cgroup: Some(cg), ..
        } = &self.cfg.watch
        else {
            return None;
        };
        if !cg.exists() {
            return None;
        }
        let c = cgroup::read_counters(cg, &mut self.buf, 100.0);
        (c.cpu_s.is_some() || c.user_s.is_some() || c.peak_bytes.is_some()).then_some(c)
    }
}

/// The watched processes' counters summed over one round.
#[derive(Default)]
struct ProcSums {
    /// CPU ticks.
    user: u64,
    sys: u64,
    rss_pages: u64,
    hwm_kb: u64,
    swap_kb: u64,
    threads: u64,
    /// Bytes read and written, the dead processes' included.
    read: u64,
    write: u64,
    any_io: bool,
    pss_kb: Option<u64>,
    /// Hardware counter increments, when any process has them.
    perf: Option<PerfValues>,
}

/// Fills the cycles per instruction and cache miss rate of `s`.
fn put_perf(s: &mut Sample, perf: &Option<PerfValues>) {
    let Some(d) = perf.as_ref().filter(|d| d.instructions > 0) else {
        return;
    };
    s.cpi = Some(round3(d.cycles as f64 / d.instructions as f64));
    if d.cache_refs > 0 {
        s.cache_miss_rate = Some(round6(d.cache_misses as f64 / d.cache_refs as f64));
    }
}

fn list_proc_pids(root: &std::path::Path, out: &mut Vec<u32>) {
    out.clear();
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            if let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                out.push(p);
            }
        }
    }
    out.sort_unstable();
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
