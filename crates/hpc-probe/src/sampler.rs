//! The sampler: finds the watched processes, reads their /proc files into a
//! reused buffer and turns two readings into a `sample` record.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use hpc_core::num::round6;
use hpc_core::record::Sample;

use crate::cgroup::{self, CgCounters, Figure, Figures, JobCgroup, Version};
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
    /// With a job cgroup that gives the memory: read the per-process
    /// detail (every process's `stat`, `status`, `io`, and `smaps_rollup`
    /// with `pss`) only every this many samples (more with many processes:
    /// see [`detail_cadence`]), and on the first and on one asked for with
    /// [`Sampler::detail_next`] (1: every sample). Without such a cgroup it
    /// is read every sample.
    pub detail_every: u64,
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
    /// When `read_b` and `write_b` were read (I/O read on detail samples
    /// only has its own interval).
    io_mono: Option<f64>,
    /// When the CPU times were last read (the processes' are read only on
    /// detail samples when the cgroup has no CPU counters).
    cpu_mono: Option<f64>,
    /// The interval the last busy cores were measured over.
    cpu_gap: Option<f64>,
    node: NodeReading,
}

/// What `getrusage(RUSAGE_CHILDREN)` says of a reaped command (see
/// [`Sampler::root_reaped`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Reaped {
    /// User CPU seconds of it and every child it waited for.
    pub user_s: f64,
    /// System CPU seconds, likewise.
    pub sys_s: f64,
    /// The largest of those processes' peak RSS, KiB.
    pub max_rss_kb: u64,
    /// Bytes read from storage (ru_inblock x 512).
    pub read_bytes: u64,
    /// Bytes written to storage (ru_oublock x 512).
    pub write_bytes: u64,
}

/// The state kept from one sample to the next.
pub struct Sampler {
    cfg: Config,
    node: NodeSources,
    procs: HashMap<(u32, u64), Tracked>,
    root_start: Option<u64>,
    /// The command's CPU is its whole tree's (see `root_reaped`).
    root_total: bool,
    /// `root_reaped` ran since the last sample.
    just_reaped: bool,
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
    last_count: usize,
    cgroup_gone: bool,
    gpus: Option<Gpus>,
    /// The figures the job cgroup gave on its first reading: from then on
    /// only these are read, and each comes from the cgroup.
    plan: Option<Figures>,
    /// Figures of the plan whose file has since gone (the job ended).
    lost: Vec<Figure>,
    /// The cgroup gives memory: per-process detail (and with it the CPU,
    /// threads and I/O the cgroup does not give, cumulative counters carried
    /// between) only every `detail_every` samples.
    fast: bool,
    /// The next sample reads the per-process detail.
    force_detail: bool,
    /// Samples taken since the last detail sample.
    since_detail: u64,
    /// Whether the last sample read the per-process detail.
    last_detail: bool,
    /// From the last cgroup listing: the pids (the probe's own left out),
    /// the tasks of slurmstepd's sub-cgroups, and whether the probe itself
    /// is in the cgroup.
    listed: usize,
    skipped_tasks: u64,
    self_listed: bool,
    /// The last CPU total read from the cgroup.
    cg_cpu_total: f64,
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
            root_total: false,
            just_reaped: false,
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
            last_count: 0,
            cgroup_gone: false,
            gpus: None,
            plan: None,
            lost: Vec::new(),
            fast: false,
            force_detail: false,
            since_detail: 0,
            last_detail: false,
            listed: 0,
            skipped_tasks: 0,
            self_listed: false,
            cg_cpu_total: 0.0,
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

    /// Whether the job has ended as its cgroup says: the folder is gone, or
    /// a file the probe reads each sample (`memory.stat`, `cpu.stat`, ...)
    /// has disappeared. The sample that saw it is the last one.
    pub fn cgroup_ended(&self) -> bool {
        self.cgroup_gone || !self.lost.is_empty()
    }

    /// The plan's figures whose file has disappeared.
    pub fn lost_figures(&self) -> &[Figure] {
        &self.lost
    }

    /// Whether the figures come from the job cgroup, with the per-process
    /// detail only every `detail_every` samples.
    pub fn cgroup_path(&self) -> bool {
        self.fast
    }

    /// Reads the per-process detail on the next sample (the last one).
    pub fn detail_next(&mut self) {
        self.force_detail = true;
    }

    /// Whether the last sample read the per-process detail.
    pub fn last_was_detail(&self) -> bool {
        self.last_detail
    }

    /// For a command the probe ran and reaped: its whole CPU use (itself
    /// and every child it waited for), from `getrusage(RUSAGE_CHILDREN)`,
    /// so the last interval before it exited is not lost; likewise its
    /// storage I/O (the kernel's ru_inblock and ru_oublock are
    /// /proc/PID/io's read_bytes and write_bytes in 512-byte units), and its
    /// largest process's peak memory.
    pub fn root_reaped(&mut self, r: Reaped) {
        let Watch::Pid(root) = self.cfg.watch else {
            return;
        };
        self.just_reaped = true;
        // A command that lived less than a sample's reading of VmHWM kept
        // its peak there alone (a 100 MiB perl run of 0.16 s was read at
        // 0.5-8 MiB).
        self.hwm_mb = self.hwm_mb.max(r.max_rss_kb as f64 / 1024.0);
        let ticks = |s: f64| (s * self.cfg.clk_tck).round() as u64;
        let Some(start) = self.root_start else {
            // Never seen alive: all of its CPU and I/O go to the dead totals.
            self.dead_user = self.dead_user.saturating_add(ticks(r.user_s));
            self.dead_sys = self.dead_sys.saturating_add(ticks(r.sys_s));
            self.dead_read = self.dead_read.saturating_add(r.read_bytes);
            self.dead_write = self.dead_write.saturating_add(r.write_bytes);
            return;
        };
        let (user, sys) = (ticks(r.user_s), ticks(r.sys_s));
        if let Some(t) = self.procs.get_mut(&(root, start)) {
            t.user = t.user.max(user);
            t.sys = t.sys.max(sys);
            if let Some(io) = &mut t.io {
                io.read_bytes = io.read_bytes.max(r.read_bytes);
                io.write_bytes = io.write_bytes.max(r.write_bytes);
            }
            self.root_total = true;
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
                let listed = self.list_cgroup(cgroup.as_ref(), &mut pids);
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

    /// Lists the job cgroup's pids into `pids` (false without a cgroup or
    /// once it is gone) and notes how many there are, the probe's own
    /// left out.
    fn list_cgroup(&mut self, cg: Option<&JobCgroup>, pids: &mut Vec<u32>) -> bool {
        pids.clear();
        let Some(cg) = cg else { return false };
        match cg.list_pids_and_skipped(&mut self.buf, pids) {
            Some(skipped) => {
                self.skipped_tasks = skipped;
                self.self_listed = pids.contains(&self.cfg.self_pid);
                self.listed = pids.len() - usize::from(self.self_listed);
                true
            }
            None => {
                self.cgroup_gone = true;
                self.listed = 0;
                false
            }
        }
    }

    /// A sample without the per-process detail: only the cgroup's pids,
    /// for the process count, the end of the job and the GPUs' processes.
    fn list_only(&mut self) {
        let Watch::Job {
            cgroup: Some(cg), ..
        } = &self.cfg.watch
        else {
            return;
        };
        let cg = cg.clone();
        let mut pids = std::mem::take(&mut self.pids);
        self.accepted.clear();
        if self.list_cgroup(Some(&cg), &mut pids) {
            let me = self.cfg.self_pid;
            self.accepted
                .extend(pids.iter().copied().filter(|&p| p != me));
        }
        self.pids = pids;
    }

    /// The probe's own threads, for a task count from a cgroup it is in.
    fn own_threads(&mut self) -> u64 {
        let me = self.cfg.self_pid;
        self.read_stat(me).map_or(1, |st| u64::from(st.threads))
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
        let io = if self.plan.is_some_and(|p| p.has(Figure::Io)) {
            None
        } else {
            self.read_io(key.0)
        };
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
        let plan = self.plan.unwrap_or_default();
        let (cg_peak, cg_swap) = (plan.has(Figure::Peak), plan.has(Figure::Swap));
        let need_status = !(cg_peak && cg_swap) && {
            let t = &self.procs[&key];
            let rss_kb = st.rss_pages.saturating_mul(self.cfg.page_size) / 1024;
            new || (!cg_peak && rss_kb > t.hwm_kb) || self.gen >= t.status_gen + STATUS_EVERY
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
    /// `mono` (seconds), with the job cgroup's counters read just before
    /// ([`Sampler::cgroup_counters`]). With a cgroup that gives the CPU and
    /// memory, the per-process files are read only on detail samples (see
    /// [`Config::detail_every`]); figures that only they give are absent
    /// from the other samples.
    pub fn sample(&mut self, t: f64, mono: f64, cg_counters: Option<CgCounters>) -> Sample {
        self.gen += 1;
        let plan = self.plan.unwrap_or_default();
        let cg = cg_counters.unwrap_or_default();
        let every = detail_cadence(
            self.cfg.detail_every,
            self.procs.len(),
            !plan.has(Figure::Cpu),
        );
        let detail = !self.fast || self.force_detail || self.gen == 1 || self.since_detail >= every;
        self.force_detail = false;
        self.since_detail = if detail { 1 } else { self.since_detail + 1 };
        self.last_detail = detail;
        // Listing the cgroup's pids costs with the number of processes:
        // with its task count at hand, a sample without detail lists them
        // only when that count says the job may have none left.
        let mut n = if detail {
            self.collect();
            self.retire_gone();
            Some(self.procs.len())
        } else if !plan.has(Figure::Tasks) {
            self.list_only();
            Some(self.listed)
        } else {
            None
        };
        let mut s = Sample {
            t,
            host: self.cfg.host.clone(),
            job_id: self.cfg.job_id.clone(),
            ..Default::default()
        };
        let sum = if detail {
            self.sum_procs()
        } else {
            ProcSums::default()
        };
        let r = Reading {
            sum: &sum,
            cg: &cg,
            plan,
            detail,
        };
        let (cpu_total, cpu_now) = self.put_cpu(&mut s, &r);
        self.put_memory(&mut s, &r);
        self.put_threads(&mut s, &r);
        if n.is_none() && (s.threads == Some(0) || self.cgroup_gone) {
            self.list_only();
            n = Some(self.listed);
        }
        if let Some(n) = n {
            self.last_count = n;
            self.seen_any |= n > 0;
            s.procs = Some(n as u32);
        }
        let io_now = self.put_io(&mut s, &r);
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
                let dt_io = p.io_mono.map(|m| mono - m).filter(|&d| io_now && d > 0.0);
                let dt_cpu = p.cpu_mono.map(|m| mono - m).filter(|&d| cpu_now && d > 0.0);
                self.put_rates(&mut s, cpu_total, dt_cpu, dt_io, &node_now, dt);
            }
        }
        let since = |now: bool, last: Option<f64>| if now { Some(mono) } else { last };
        let io_mono = since(io_now, self.prev.as_ref().and_then(|p| p.io_mono));
        let cpu_mono = since(cpu_now, self.prev.as_ref().and_then(|p| p.cpu_mono));
        let cpu_gap = match (&self.prev, cpu_now) {
            (Some(p), true) => p.cpu_mono.map(|m| mono - m).or(p.cpu_gap),
            (Some(p), false) => p.cpu_gap,
            (None, _) => None,
        };
        self.just_reaped = false;
        self.prev = Some(Prev {
            mono,
            cpu_s: cpu_total.max(self.prev.as_ref().map_or(0.0, |p| p.cpu_s)),
            read_b: self.out_read,
            write_b: self.out_write,
            io_mono,
            cpu_mono,
            cpu_gap,
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
        // The command reaped with its whole CPU (`root_reaped`, which
        // counts every child waited for): the processes of its tree gone
        // with it were waited for within the tree, and their CPU is in that
        // total already (it was counted twice: 3.9 s for 3.2 s used).
        let mut within: HashSet<u32> = HashSet::new();
        if let (true, Watch::Pid(root), Some(start)) =
            (self.root_total, &self.cfg.watch, self.root_start)
        {
            if gone.contains(&(*root, start)) {
                within.insert(*root);
                let mut grew = true;
                while grew {
                    grew = false;
                    for k in &gone {
                        let under = self.procs.get(k).is_some_and(|v| within.contains(&v.ppid));
                        grew |= under && within.insert(k.0);
                    }
                }
            }
        }
        for k in gone {
            if let Some(v) = self.procs.remove(&k) {
                let counted = within.contains(&v.ppid);
                if !self.accepted.contains(&v.ppid) && !counted {
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

    /// Fills the CPU times of `s`: the cgroup's when it gives them (the
    /// last ones read once its file is gone), else the processes' on detail
    /// samples, carried between (they are cumulative). Returns the CPU
    /// seconds the busy cores are derived from, and whether they were read
    /// now.
    fn put_cpu(&mut self, s: &mut Sample, r: &Reading) -> (f64, bool) {
        let tck = self.cfg.clk_tck;
        let mut user_s = r.sum.user.saturating_add(self.dead_user) as f64 / tck;
        let mut sys_s = r.sum.sys.saturating_add(self.dead_sys) as f64 / tck;
        let mut cpu_total = user_s + sys_s;
        let mut now = r.detail;
        if !r.plan.has(Figure::Cpu) && !r.detail {
            // Not read this sample: the last reading stands.
            user_s = self.out_user;
            sys_s = self.out_sys;
            cpu_total = self.prev.as_ref().map_or(0.0, |p| p.cpu_s);
        } else if r.plan.has(Figure::Cpu) {
            now = true;
            match (r.cg.user_s, r.cg.sys_s) {
                (Some(u), Some(sy)) => {
                    user_s = u;
                    sys_s = sy;
                    cpu_total = r.cg.cpu_s.unwrap_or(u + sy);
                    self.cg_cpu_total = cpu_total;
                }
                _ => {
                    // The file is gone (the job ended): no more CPU.
                    user_s = self.out_user;
                    sys_s = self.out_sys;
                    cpu_total = self.cg_cpu_total;
                }
            }
        }
        // Reported cumulative values never go backwards.
        self.out_user = self.out_user.max(user_s);
        self.out_sys = self.out_sys.max(sys_s);
        s.cpu_user_s = Some(round3(self.out_user));
        s.cpu_sys_s = Some(round3(self.out_sys));
        (cpu_total, now)
    }

    /// Fills the memory of `s`. With the cgroup's `memory.stat`: RSS as
    /// anonymous plus shared memory, the page cache apart, the peak from
    /// the cgroup's high-water mark where it has one, else the running
    /// maximum of the RSS. Else the processes' sums, as before.
    fn put_memory(&mut self, s: &mut Sample, r: &Reading) {
        let mut rss_mb = None;
        if r.plan.has(Figure::Memory) {
            rss_mb = r.cg.rss_bytes.map(|b| b as f64 / MB);
            s.page_cache_mb = r.cg.cache_bytes.map(|b| round3(b as f64 / MB));
        } else if r.detail {
            rss_mb = Some(r.sum.rss_pages as f64 * self.cfg.page_size as f64 / MB);
        }
        if r.plan.has(Figure::Peak) {
            if let Some(p) = r.cg.peak_bytes {
                self.hwm_mb = self.hwm_mb.max(p as f64 / MB);
            }
        } else if !r.plan.has(Figure::Memory) && r.detail {
            self.hwm_mb = self.hwm_mb.max(r.sum.hwm_kb as f64 / 1024.0);
        }
        self.hwm_mb = self.hwm_mb.max(rss_mb.unwrap_or(0.0));
        // No memory read yet (a command that ended before the first
        // reading, or read as it started): unknown, not 0 MB, which
        // hpc-flags would take for a peak of 0.
        let none_yet = self.hwm_mb <= 0.0;
        if none_yet {
            rss_mb = None;
        } else {
            s.hwm_mb = Some(round3(self.hwm_mb));
        }
        s.rss_mb = rss_mb.map(round3);
        s.swap_mb = if none_yet {
            None
        } else if r.plan.has(Figure::Swap) {
            r.cg.swap_bytes.map(|b| round3(b as f64 / MB))
        } else if r.detail {
            Some(round3(r.sum.swap_kb as f64 / 1024.0))
        } else {
            None
        };
        s.pss_mb = r.sum.pss_kb.map(|p| round3(p as f64 / 1024.0));
    }

    /// Fills the thread count of `s`: the cgroup's tasks (slurmstepd's and
    /// the probe's own taken out), else the processes' threads on r.detail
    /// samples.
    fn put_threads(&mut self, s: &mut Sample, r: &Reading) {
        let threads = if r.plan.has(Figure::Tasks) {
            r.cg.tasks.map(|t| {
                let own = if self.self_listed {
                    self.own_threads()
                } else {
                    0
                };
                t.saturating_sub(self.skipped_tasks).saturating_sub(own)
            })
        } else if r.detail {
            Some(r.sum.threads)
        } else {
            None
        };
        s.threads = threads.map(|t| t.min(u64::from(u32::MAX)) as u32);
    }

    /// Fills the cumulative I/O of `s`: the cgroup's when it gives it (the
    /// last one read once its file is gone), else the processes' on r.detail
    /// samples, once any has shown I/O. Returns whether I/O was read now.
    fn put_io(&mut self, s: &mut Sample, r: &Reading) -> bool {
        let mut now = false;
        if r.plan.has(Figure::Io) {
            if let (Some(r), Some(w)) = (r.cg.read_bytes, r.cg.write_bytes) {
                self.out_read = self.out_read.max(r);
                self.out_write = self.out_write.max(w);
                now = true;
            }
            self.io_seen = true;
        } else if r.detail {
            now = r.sum.any_io || self.io_seen;
            self.io_seen = now;
            if now {
                self.out_read = self.out_read.max(r.sum.read);
                self.out_write = self.out_write.max(r.sum.write);
            }
        }
        if self.io_seen && (now || r.plan.has(Figure::Io)) {
            s.read_mb = Some(round3(self.out_read as f64 / MB));
            s.write_mb = Some(round3(self.out_write as f64 / MB));
        }
        now
    }

    /// Fills the rates of `s` over the `dt` seconds since the last sample:
    /// busy cores (over `dt_cpu`, the seconds since the last CPU reading,
    /// when the CPU was read now), I/O (over `dt_io`, likewise) and the
    /// node's counters.
    fn put_rates(
        &mut self,
        s: &mut Sample,
        cpu_total: f64,
        dt_cpu: Option<f64>,
        dt_io: Option<f64>,
        node_now: &NodeReading,
        dt: f64,
    ) {
        let Some(p) = &self.prev else {
            return;
        };
        // The sample taken as the command is reaped, under half the last
        // interval after the one before (a few ms), holds the CPU the
        // reaping hands over (getrusage) and a clock tick's rounding: over
        // 2 ms that read 15 busy cores on 2 CPUs. Its rate is left out;
        // the CPU seconds stay in cpu_user_s and cpu_sys_s.
        let steady = |d: f64| !self.just_reaped || p.cpu_gap.map_or(true, |g| d >= g / 2.0);
        if let Some(dt_cpu) = dt_cpu.filter(|&d| steady(d)) {
            let cores = (cpu_total - p.cpu_s).max(0.0) / dt_cpu;
            s.cpu_cores = Some(round3(cores));
            if let Some(c) = self.cfg.cpus.filter(|&c| c > 0) {
                s.cpu_frac = Some(round3(cores / f64::from(c)));
            }
        }
        if let Some(dt_io) = dt_io {
            s.read_mbps = Some(round3(
                self.out_read.saturating_sub(p.read_b) as f64 / MB / dt_io,
            ));
            s.write_mbps = Some(round3(
                self.out_write.saturating_sub(p.write_b) as f64 / MB / dt_io,
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

    /// Reads the job cgroup's counters, when the sampler watches one. The
    /// first reading finds which figures the cgroup gives (the plan: see
    /// [`Sampler::sources`]); later ones read only those, and a figure
    /// whose file has gone marks the job as ended
    /// ([`Sampler::cgroup_ended`]). `None` without a cgroup, once it is
    /// gone, or when it gives nothing.
    pub fn cgroup_counters(&mut self) -> Option<CgCounters> {
        let Watch::Job {
            cgroup: Some(cg), ..
        } = &self.cfg.watch
        else {
            return None;
        };
        if !cg.exists() {
            self.cgroup_gone = true;
            return None;
        }
        let c = cgroup::read_counters(cg, &mut self.buf, 100.0, self.plan);
        let now = c.figures();
        match self.plan {
            None => {
                self.plan = Some(now);
                // Memory from the cgroup every sample; whatever else the
                // processes give only on detail samples (a v1 job cgroup
                // often has the memory controller alone).
                self.fast = now.has(Figure::Memory);
            }
            Some(plan) if self.lost.is_empty() => {
                self.lost = plan.lost_in(now);
                if !self.lost.is_empty() && cg.exists() {
                    let mut files: Vec<String> = self
                        .lost
                        .iter()
                        .filter_map(|&f| cg.file_of(f))
                        .map(|p| hpc_core::paths::shown(&p))
                        .collect();
                    files.dedup();
                    hpc_core::note!(
                        "hpc-probe: {} can no longer be read: taken as the end of the job",
                        files.join(", ")
                    );
                }
            }
            Some(_) => {}
        }
        (!now.is_empty()).then_some(c)
    }

    /// Where each figure of the samples comes from, for the meta's
    /// `source`: `cgroup FILE` (the job cgroup, each sample), `proc FILE`
    /// (each watched process, each sample), `proc FILE, detail samples`
    /// (each watched process, only on detail samples) or `running maximum
    /// of rss_mb`. Rates follow their counters (`read_mbps` its
    /// `read_mb`, `cpu_cores` and `cpu_frac` `cpu_user_s`). Call it after
    /// the first [`Sampler::cgroup_counters`].
    pub fn sources(&self) -> serde_json::Map<String, serde_json::Value> {
        let plan = self.plan.unwrap_or_default();
        let version = match &self.cfg.watch {
            Watch::Job {
                cgroup: Some(cg), ..
            } => cg.version,
            _ => Version::V2,
        };
        let cgroup = |f: Figure| format!("cgroup {}", f.file(version));
        let detail = if self.fast { ", detail samples" } else { "" };
        let proc_ = |file: &str| format!("proc {file}{detail}");
        let pick = |f: Figure, file: &str| {
            if plan.has(f) {
                cgroup(f)
            } else {
                proc_(file)
            }
        };
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: String| {
            m.insert(k.into(), serde_json::Value::from(v));
        };
        put("rss_mb", pick(Figure::Memory, "stat"));
        if plan.has(Figure::Memory) {
            put("page_cache_mb", cgroup(Figure::Memory));
        }
        put(
            "hwm_mb",
            if plan.has(Figure::Peak) {
                cgroup(Figure::Peak)
            } else if plan.has(Figure::Memory) {
                "running maximum of rss_mb".into()
            } else {
                proc_("status")
            },
        );
        put("swap_mb", pick(Figure::Swap, "status"));
        if self.cfg.pss {
            put("pss_mb", proc_("smaps_rollup"));
        }
        let cpu = pick(Figure::Cpu, "stat");
        put("cpu_user_s", cpu.clone());
        put("cpu_sys_s", cpu);
        put("threads", pick(Figure::Tasks, "stat"));
        let procs = match &self.cfg.watch {
            Watch::Job {
                cgroup: Some(_), ..
            } if self.fast && plan.has(Figure::Tasks) => "cgroup cgroup.procs, detail samples",
            Watch::Job {
                cgroup: Some(_), ..
            } => "cgroup cgroup.procs",
            _ => "proc stat",
        };
        put("procs", procs.to_string());
        let io = pick(Figure::Io, "io");
        put("read_mb", io.clone());
        put("write_mb", io);
        m
    }
}

/// Samples between two detail samples. Reading every process's files
/// costs with their number, so a detail sample comes at most once for
/// each [`PROCS_PER_DETAIL`] processes, which keeps the cost a sample about
/// flat whatever the job's size (the counters read then are cumulative:
/// totals lose nothing). With the CPU from the cgroup: `every`
/// (`--detail-every`), spaced out so. With the CPU from the processes (a
/// cgroup with the memory alone): as often as that allows, so a job of a
/// few processes still has its busy cores every sample. `--detail-every
/// 1` is kept: every sample.
pub fn detail_cadence(every: u64, procs: usize, cpu_from_procs: bool) -> u64 {
    let spaced = (procs as u64).div_ceil(PROCS_PER_DETAIL).max(1);
    match every {
        0 | 1 => 1,
        _ if cpu_from_procs => spaced,
        _ => every.max(spaced),
    }
}

/// See [`detail_cadence`].
pub const PROCS_PER_DETAIL: u64 = 8;

/// What one sample is made from: the processes' sums (zero without
/// detail), the cgroup's counters, which figures the cgroup gives, and
/// whether this is a detail sample.
struct Reading<'a> {
    sum: &'a ProcSums,
    cg: &'a CgCounters,
    plan: Figures,
    detail: bool,
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

#[cfg(test)]
mod cadence_tests {
    use super::*;

    #[test]
    fn many_processes_space_the_detail_samples_out() {
        assert_eq!(detail_cadence(20, 1, false), 20);
        assert_eq!(detail_cadence(20, 160, false), 20);
        assert_eq!(
            detail_cadence(20, 512, false),
            64,
            "one sample in 64 for 512"
        );
        assert_eq!(detail_cadence(1, 512, false), 1, "--detail-every 1 is kept");
        // The CPU from the processes: as often as the cost allows.
        assert_eq!(
            detail_cadence(20, 2, true),
            1,
            "a few processes: every sample"
        );
        assert_eq!(detail_cadence(20, 64, true), 8);
        assert_eq!(detail_cadence(20, 512, true), 64);
    }
}
