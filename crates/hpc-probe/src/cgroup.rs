//! Finding a SLURM job's cgroup (v1, v1 with co-mounted controllers, v2)
//! and reading its process list and counters.

use std::fs;
use std::path::{Path, PathBuf};

use crate::parse;

/// One line of `/proc/PID/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgLine<'a> {
    /// The hierarchy id (`0` for cgroup v2).
    pub id: &'a str,
    /// The comma-separated controllers (empty for v2).
    pub controllers: &'a str,
    /// The cgroup path, as the kernel prints it.
    pub path: &'a str,
}

/// Parses `/proc/PID/cgroup`; malformed lines are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<CgLine<'_>> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.trim_end().splitn(3, ':');
            let id = it.next()?;
            let controllers = it.next()?;
            let path = it.next()?;
            if id.is_empty() || !path.starts_with('/') {
                return None;
            }
            Some(CgLine {
                id,
                controllers,
                path,
            })
        })
        .collect()
}

/// Normalises a cgroup path into its components. `.` is dropped and `..`
/// removes the previous component; a path that climbs above the root (as
/// seen from another cgroup namespace, `/../../user.slice/x`) cannot be
/// joined to the mount point and gives `None`.
pub fn normalize(path: &str) -> Option<Vec<&str>> {
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The components of a path that climbs above its root, after the last `..`
/// (`/../../user-1000.slice/session-520.scope` gives the last two).
fn tail_after_parents(path: &str) -> Vec<&str> {
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let last_up = comps.iter().rposition(|c| *c == "..").map_or(0, |i| i + 1);
    comps[last_up..].to_vec()
}

/// Resolves a cgroup path below a hierarchy's mount point. A path that climbs
/// above the root is looked up by its tail: the first folder, at most
/// `depth` levels down, that ends with the remaining components. A path
/// whose folder does not exist gives `None`.
pub fn resolve(mount: &Path, path: &str) -> Option<PathBuf> {
    if let Some(comps) = normalize(path) {
        let mut p = mount.to_path_buf();
        p.extend(comps);
        return p.is_dir().then_some(p);
    }
    let tail = tail_after_parents(path);
    if tail.is_empty() {
        return None;
    }
    find_suffix(mount, &tail, 4)
}

fn find_suffix(dir: &Path, tail: &[&str], depth: usize) -> Option<PathBuf> {
    let mut cand = dir.to_path_buf();
    cand.extend(tail);
    if cand.is_dir() {
        return Some(cand);
    }
    if depth == 0 {
        return None;
    }
    let mut subs: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subs.sort();
    subs.iter().find_map(|s| find_suffix(s, tail, depth - 1))
}

/// The cgroup version of a found job cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// cgroup v1: separate hierarchies per controller.
    V1,
    /// cgroup v2: one unified hierarchy.
    V2,
}

/// A job's cgroup folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCgroup {
    /// v1 or v2.
    pub version: Version,
    /// The folder whose `cgroup.procs` (and sub-folders') list the processes;
    /// for v2 it also holds `memory.*` and `cpu.stat`; for v1 it is the
    /// memory hierarchy's folder.
    pub dir: PathBuf,
    /// v1 only: the cpuacct folder, when that hierarchy has the job.
    pub cpuacct: Option<PathBuf>,
    /// v1 only: the devices folder (its `devices.list` names the job's
    /// GPUs), when that hierarchy has the job.
    pub devices: Option<PathBuf>,
    /// v1 only: the blkio folder, when that hierarchy has the job.
    pub blkio: Option<PathBuf>,
    /// v1 only: the pids folder, when that hierarchy has the job.
    pub pids: Option<PathBuf>,
}

impl JobCgroup {
    /// A v2 job cgroup at `dir`.
    pub fn v2(dir: PathBuf) -> JobCgroup {
        JobCgroup {
            version: Version::V2,
            dir,
            cpuacct: None,
            devices: None,
            blkio: None,
            pids: None,
        }
    }

    /// A short description for the `meta` record.
    pub fn describe(&self) -> (u8, String) {
        let v = match self.version {
            Version::V1 => 1,
            Version::V2 => 2,
        };
        (v, self.dir.display().to_string())
    }

    /// Whether the cgroup folder still exists.
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Appends the pids of every process in the cgroup and its sub-cgroups.
    /// v2 sub-folders named `slurm` or `system` hold slurmstepd itself and
    /// are skipped. Also returns the tasks (threads) of
    /// the skipped slurmstepd sub-cgroups, from their `pids.current`, so
    /// they can be taken out of the job's own count. `None` when the
    /// folder is gone.
    pub fn list_pids_and_skipped(&self, buf: &mut Vec<u8>, out: &mut Vec<u32>) -> Option<u64> {
        if !self.dir.is_dir() {
            return None;
        }
        let mut skipped = 0;
        walk_procs(&self.dir, buf, out, 0, &mut skipped);
        Some(skipped)
    }

    /// The folder a figure's file is read from.
    fn folder(&self, f: Figure) -> Option<&Path> {
        match (self.version, f) {
            (Version::V2, _) => Some(&self.dir),
            (Version::V1, Figure::Cpu) => self.cpuacct.as_deref(),
            (Version::V1, Figure::Io) => self.blkio.as_deref(),
            (Version::V1, Figure::Tasks) => self.pids.as_deref(),
            (Version::V1, _) => Some(&self.dir),
        }
    }

    /// The file a figure is read from (`None`: that hierarchy does not
    /// have the job).
    pub fn file_of(&self, f: Figure) -> Option<PathBuf> {
        self.folder(f).map(|d| d.join(f.file(self.version)))
    }
}

fn walk_procs(dir: &Path, buf: &mut Vec<u8>, out: &mut Vec<u32>, depth: usize, skipped: &mut u64) {
    if crate::read_into(&dir.join("cgroup.procs"), buf) {
        parse::parse_pid_list(buf, out);
    }
    if depth > 8 {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name();
        if depth >= 1 && (name == "slurm" || name == "system") {
            if crate::read_into(&e.path().join("pids.current"), buf) {
                *skipped = skipped.saturating_add(parse::parse_single(buf).unwrap_or(0));
            }
            continue;
        }
        walk_procs(&e.path(), buf, out, depth + 1, skipped);
    }
}

/// The v2 mount under `sys_root`: `fs/cgroup` when it is unified, else the
/// hybrid layout's `fs/cgroup/unified`.
pub fn v2_mount(sys_root: &Path) -> Option<PathBuf> {
    let base = sys_root.join("fs/cgroup");
    if base.join("cgroup.controllers").is_file() || base.join("system.slice").is_dir() {
        return Some(base);
    }
    let uni = base.join("unified");
    uni.is_dir().then_some(uni)
}

/// The mount point of the v1 hierarchy holding `controller`, trying the
/// controller's own name and co-mounted names (`cpu,cpuacct`).
pub fn v1_mount(sys_root: &Path, controllers: &str, controller: &str) -> Option<PathBuf> {
    let base = sys_root.join("fs/cgroup");
    let mut names = vec![controllers.to_string(), controller.to_string()];
    if controller == "cpuacct" || controller == "cpu" {
        names.push("cpu,cpuacct".into());
        names.push("cpuacct,cpu".into());
    }
    names
        .into_iter()
        .filter(|n| !n.is_empty())
        .map(|n| base.join(n))
        .find(|p| p.is_dir())
}

/// The job folder named by a path such as
/// `/slurm/uid_1000/job_42/step_0/task_0`: the path cut after `job_<id>`.
pub fn cut_at_job<'a>(path: &'a str, job: &str) -> Option<&'a str> {
    let want = format!("job_{job}");
    let mut end = 0usize;
    for c in path.split('/') {
        end += c.len();
        if c == want {
            return Some(&path[..end]);
        }
        end += 1;
    }
    None
}

/// The job's cgroup as named by one process's `/proc/PID/cgroup` text.
pub fn job_cgroup_from_lines(sys_root: &Path, text: &str, job: &str) -> Option<JobCgroup> {
    let lines = parse_proc_cgroup(text);
    let mut mem: Option<PathBuf> = None;
    let mut cpu: Option<PathBuf> = None;
    let mut devices: Option<PathBuf> = None;
    let mut blkio: Option<PathBuf> = None;
    let mut pids: Option<PathBuf> = None;
    for l in &lines {
        let Some(cut) = cut_at_job(l.path, job) else {
            continue;
        };
        if l.id == "0" && l.controllers.is_empty() {
            if let Some(dir) = v2_mount(sys_root).and_then(|m| resolve(&m, cut)) {
                return Some(JobCgroup::v2(dir));
            }
            continue;
        }
        let ctl: Vec<&str> = l.controllers.split(',').collect();
        if ctl.contains(&"memory") {
            mem = v1_mount(sys_root, l.controllers, "memory").and_then(|m| resolve(&m, cut));
        }
        if ctl.contains(&"cpuacct") {
            cpu = v1_mount(sys_root, l.controllers, "cpuacct").and_then(|m| resolve(&m, cut));
        }
        if ctl.contains(&"devices") {
            devices = v1_mount(sys_root, l.controllers, "devices").and_then(|m| resolve(&m, cut));
        }
        if ctl.contains(&"blkio") {
            blkio = v1_mount(sys_root, l.controllers, "blkio").and_then(|m| resolve(&m, cut));
        }
        if ctl.contains(&"pids") {
            pids = v1_mount(sys_root, l.controllers, "pids").and_then(|m| resolve(&m, cut));
        }
    }
    let dir = mem.or_else(|| cpu.clone())?;
    Some(JobCgroup {
        version: Version::V1,
        dir,
        cpuacct: cpu,
        devices,
        blkio,
        pids,
    })
}

fn dirs_matching(parent: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(&pred))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// Looks for the job's cgroup where SLURM puts it: v2
/// `system.slice/[<node>_]slurmstepd.scope/job_<id>`, v1
/// `<controller>/slurm[_<node>]/uid_<uid>/job_<id>`. With `node`
/// (SLURMD_NODENAME) on a host that runs several slurmd (`slurmd -N`,
/// multiple-slurmd), that node's own folders are looked in first, then the
/// others: a probe of one node takes
/// another node's cgroup of the same job only when its own has none (a
/// probe inside the job takes its own cgroup before this).
pub fn find_slurm_job_cgroup(sys_root: &Path, job: &str, node: Option<&str>) -> Option<JobCgroup> {
    let job_dir = format!("job_{job}");
    if let Some(m) = v2_mount(sys_root) {
        let mut scopes =
            dirs_matching(&m.join("system.slice"), |n| n.ends_with("slurmstepd.scope"));
        if let Some(node) = node {
            let own = format!("{node}_slurmstepd.scope");
            scopes.sort_by_key(|d| d.file_name() != Some(std::ffi::OsStr::new(&own)));
        }
        for scope in scopes {
            let d = scope.join(&job_dir);
            if d.is_dir() {
                return Some(JobCgroup::v2(d));
            }
        }
    }
    let bases: Vec<String> = node
        .map(|n| format!("slurm_{n}"))
        .into_iter()
        .chain(["slurm".to_string()])
        .collect();
    let find_v1 = |controller: &str| -> Option<PathBuf> {
        let m = v1_mount(sys_root, controller, controller)?;
        bases.iter().find_map(|base| {
            dirs_matching(&m.join(base), |n| n.starts_with("uid_"))
                .into_iter()
                .map(|u| u.join(&job_dir))
                .find(|d| d.is_dir())
        })
    };
    let mem = find_v1("memory");
    let cpu = find_v1("cpuacct");
    let dir = mem.or_else(|| cpu.clone())?;
    Some(JobCgroup {
        version: Version::V1,
        dir,
        cpuacct: cpu,
        devices: find_v1("devices"),
        blkio: find_v1("blkio"),
        pids: find_v1("pids"),
    })
}

/// The job-wide figures a job cgroup can give, each from its own file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// User and system CPU time (v2 `cpu.stat`; v1 `cpuacct.stat`, with
    /// `cpuacct.usage` for the busy cores).
    Cpu,
    /// Resident memory and page cache (`memory.stat`).
    Memory,
    /// The memory high-water mark (v2 `memory.peak`, which kernels before
    /// 5.19 lack; v1 `memory.max_usage_in_bytes`).
    Peak,
    /// Swap used (v2 `memory.swap.current`; v1 `memory.stat` `total_swap`,
    /// with swap accounting on).
    Swap,
    /// Bytes read and written (v2 `io.stat`; v1
    /// `blkio.throttle.io_service_bytes_recursive`).
    Io,
    /// Tasks, that is threads (`pids.current`).
    Tasks,
}

impl Figure {
    /// Every figure.
    pub const ALL: [Figure; 6] = [
        Figure::Cpu,
        Figure::Memory,
        Figure::Peak,
        Figure::Swap,
        Figure::Io,
        Figure::Tasks,
    ];

    /// The name of the file the figure is read from.
    pub fn file(self, v: Version) -> &'static str {
        match (self, v) {
            (Figure::Cpu, Version::V2) => "cpu.stat",
            (Figure::Cpu, Version::V1) => "cpuacct.stat",
            (Figure::Memory, _) => "memory.stat",
            (Figure::Peak, Version::V2) => "memory.peak",
            (Figure::Peak, Version::V1) => "memory.max_usage_in_bytes",
            (Figure::Swap, Version::V2) => "memory.swap.current",
            (Figure::Swap, Version::V1) => "memory.stat",
            (Figure::Io, Version::V2) => "io.stat",
            (Figure::Io, Version::V1) => "blkio.throttle.io_service_bytes_recursive",
            (Figure::Tasks, _) => "pids.current",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Figure`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures(u8);

impl Figures {
    /// Whether `f` is in the set.
    pub fn has(self, f: Figure) -> bool {
        self.0 & f.bit() != 0
    }

    /// The set with `f` added.
    pub fn with(self, f: Figure) -> Figures {
        Figures(self.0 | f.bit())
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The figures of `self` that `now` lacks.
    pub fn lost_in(self, now: Figures) -> Vec<Figure> {
        Figure::ALL
            .into_iter()
            .filter(|&f| self.has(f) && !now.has(f))
            .collect()
    }
}

/// Counters read from a job cgroup: cumulative CPU and I/O, current
/// memory and tasks. Each is `None` when its file is absent or unreadable.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgCounters {
    /// Total CPU seconds.
    pub cpu_s: Option<f64>,
    /// User CPU seconds.
    pub user_s: Option<f64>,
    /// System CPU seconds.
    pub sys_s: Option<f64>,
    /// Anonymous plus shared memory, bytes (`memory.stat`).
    pub rss_bytes: Option<u64>,
    /// Page cache without shared memory, bytes (`memory.stat`).
    pub cache_bytes: Option<u64>,
    /// Peak memory use, bytes.
    pub peak_bytes: Option<u64>,
    /// Swap use, bytes.
    pub swap_bytes: Option<u64>,
    /// Bytes read from block devices, cumulative.
    pub read_bytes: Option<u64>,
    /// Bytes written to block devices, cumulative.
    pub write_bytes: Option<u64>,
    /// Tasks (threads) in the cgroup and its sub-cgroups.
    pub tasks: Option<u64>,
}

impl CgCounters {
    /// The figures this reading holds.
    pub fn figures(&self) -> Figures {
        let mut f = Figures::default();
        let mut add = |fig: Figure, ok: bool| {
            if ok {
                f = f.with(fig);
            }
        };
        add(Figure::Cpu, self.user_s.is_some() && self.sys_s.is_some());
        add(Figure::Memory, self.rss_bytes.is_some());
        add(Figure::Peak, self.peak_bytes.is_some());
        add(Figure::Swap, self.swap_bytes.is_some());
        add(Figure::Io, self.read_bytes.is_some());
        add(Figure::Tasks, self.tasks.is_some());
        f
    }
}

/// Reads the cgroup's counters: every figure when `want` is `None` (the
/// first reading, which finds what the cgroup has), else only the figures
/// in `want`. v1 `cpuacct.stat` is in USER_HZ ticks (`user_hz`).
pub fn read_counters(
    cg: &JobCgroup,
    buf: &mut Vec<u8>,
    user_hz: f64,
    want: Option<Figures>,
) -> CgCounters {
    let mut c = CgCounters::default();
    let wanted = |f: Figure| !matches!(want, Some(w) if !w.has(f));
    let read = |f: Figure, buf: &mut Vec<u8>| -> bool {
        wanted(f) && cg.file_of(f).is_some_and(|p| crate::read_into(&p, buf))
    };
    let v2 = cg.version == Version::V2;
    if read(Figure::Cpu, buf) {
        if v2 {
            if let Some((u, us, sy)) = parse::parse_cpu_stat_v2(buf) {
                c.cpu_s = Some(u as f64 / 1e6);
                c.user_s = Some(us as f64 / 1e6);
                c.sys_s = Some(sy as f64 / 1e6);
            }
        } else if let Some((u, s)) = parse::parse_cpuacct_stat(buf) {
            c.user_s = Some(u as f64 / user_hz);
            c.sys_s = Some(s as f64 / user_hz);
            // The nanosecond total, finer than the ticks, for busy cores.
            let usage = cg.cpuacct.as_ref().map(|d| d.join("cpuacct.usage"));
            if usage.is_some_and(|p| crate::read_into(&p, buf)) {
                c.cpu_s = parse::parse_single(buf).map(|ns| ns as f64 / 1e9);
            }
        }
    }
    // memory.stat gives the memory, and on v1 the swap too: one read.
    let mem_wanted = wanted(Figure::Memory) || (!v2 && wanted(Figure::Swap));
    let mem_file = cg.file_of(Figure::Memory);
    if mem_wanted && mem_file.is_some_and(|p| crate::read_into(&p, buf)) {
        if let Some(m) = parse::parse_memory_stat(buf, v2) {
            if wanted(Figure::Memory) {
                c.rss_bytes = Some(m.rss);
                c.cache_bytes = Some(m.cache);
            }
            if !v2 && wanted(Figure::Swap) {
                c.swap_bytes = m.swap;
            }
        }
    }
    if read(Figure::Peak, buf) {
        c.peak_bytes = parse::parse_single(buf);
    }
    if v2 && read(Figure::Swap, buf) {
        c.swap_bytes = parse::parse_single(buf);
    }
    if read(Figure::Io, buf) {
        let (r, w) = if v2 {
            parse::parse_io_stat(buf)
        } else {
            parse::parse_blkio_bytes(buf)
        };
        c.read_bytes = Some(r);
        c.write_bytes = Some(w);
    }
    if read(Figure::Tasks, buf) {
        c.tasks = parse::parse_single(buf);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_lines() {
        let text = "12:memory:/slurm/uid_1000/job_42/step_0/task_0\n5:cpu,cpuacct:/slurm/uid_1000/job_42/step_0/task_0\n1:name=systemd:/user.slice\nbad line\n0::/";
        let l = parse_proc_cgroup(text);
        assert_eq!(l.len(), 4);
        assert_eq!(l[1].controllers, "cpu,cpuacct");
        assert_eq!(l[3].id, "0");
        assert_eq!(l[3].path, "/");
    }

    #[test]
    fn relative_v2_path_is_not_joined_blindly() {
        assert_eq!(normalize("/../../user-1000.slice/session-520.scope"), None);
        assert_eq!(normalize("/a/./b/../c"), Some(vec!["a", "c"]));
        assert_eq!(normalize("/"), Some(vec![]));
        assert_eq!(
            tail_after_parents("/../../user-1000.slice/session-520.scope"),
            vec!["user-1000.slice", "session-520.scope"]
        );
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path();
        // Joined blindly, `m/../../user-1000.slice` would point outside the mount.
        assert_eq!(resolve(m, "/../../user-1000.slice/session-520.scope"), None);
        let real = m.join("user.slice/user-1000.slice/session-520.scope");
        fs::create_dir_all(&real).unwrap();
        assert_eq!(
            resolve(m, "/../../user-1000.slice/session-520.scope"),
            Some(real.clone())
        );
        assert_eq!(
            resolve(m, "/user.slice/user-1000.slice/session-520.scope"),
            Some(real)
        );
        assert_eq!(resolve(m, "/../.."), None);
    }

    #[test]
    fn job_folder_is_cut_after_job_component() {
        assert_eq!(
            cut_at_job("/slurm/uid_1000/job_42/step_0/task_0", "42"),
            Some("/slurm/uid_1000/job_42")
        );
        assert_eq!(
            cut_at_job(
                "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
                "42"
            ),
            Some("/system.slice/slurmstepd.scope/job_42")
        );
        assert_eq!(cut_at_job("/slurm/uid_1000/job_420/step_0", "42"), None);
        assert_eq!(cut_at_job("/", "42"), None);
    }

    fn mkdirs(root: &Path, rel: &str) -> PathBuf {
        let p = root.join(rel);
        fs::create_dir_all(&p).unwrap();
        p
    }

    /// The cluster and its kin: each v1 controller has the job at
    /// its own depth, or not at all. Each is cut at the job's folder (the
    /// deepest that holds the whole job: the step and task folders hold
    /// part of it); one whose path stops above the job (its user's folder,
    /// the root) holds other jobs too and is not the job's.
    #[test]
    fn each_controller_is_found_at_its_own_depth_or_not_at_all() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        let mem = mkdirs(
            sys,
            "fs/cgroup/memory/slurm_vm/uid_0/job_5/step_batch/task_0",
        );
        mkdirs(sys, "fs/cgroup/cpuacct/slurm_vm/uid_0");
        let blkio = mkdirs(sys, "fs/cgroup/blkio/slurm_vm/uid_0/job_5");
        let pids = mkdirs(sys, "fs/cgroup/pids/slurm_vm/uid_0/job_5/step_batch");
        let text = "9:memory:/slurm_vm/uid_0/job_5/step_batch/task_0\n\
                    4:cpuacct:/slurm_vm/uid_0\n\
                    6:blkio:/slurm_vm/uid_0/job_5\n\
                    3:pids:/slurm_vm/uid_0/job_5/step_batch\n\
                    7:devices:/\n";
        let cg = job_cgroup_from_lines(sys, text, "5").unwrap();
        let job = |p: &Path, up: usize| p.ancestors().nth(up).unwrap().to_path_buf();
        assert_eq!(cg.dir, job(&mem, 2), "memory at the job, not its task");
        assert_eq!(cg.cpuacct, None, "cpuacct stops at the user's folder");
        assert_eq!(cg.blkio, Some(blkio));
        assert_eq!(cg.pids, Some(job(&pids, 1)));
        assert_eq!(cg.devices, None, "devices at the root");
        // Only cpuacct has the job: its folder stands for the job.
        let text = "9:memory:/\n4:cpuacct:/slurm_vm/uid_0/job_5/step_batch\n";
        mkdirs(sys, "fs/cgroup/cpuacct/slurm_vm/uid_0/job_5/step_batch");
        let cg = job_cgroup_from_lines(sys, text, "5").unwrap();
        assert_eq!(cg.dir, sys.join("fs/cgroup/cpuacct/slurm_vm/uid_0/job_5"));
        // No controller has it: not the cgroup path.
        assert!(job_cgroup_from_lines(sys, "9:memory:/\n4:cpuacct:/slurm_vm\n", "5").is_none());
    }

    #[test]
    fn v1_separate_and_comounted_and_v2_resolution() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        // v1, separate hierarchies.
        let mem = mkdirs(sys, "fs/cgroup/memory/slurm/uid_1000/job_42/step_0/task_0");
        let cpu = mkdirs(sys, "fs/cgroup/cpuacct/slurm/uid_1000/job_42/step_0/task_0");
        let dev = mkdirs(sys, "fs/cgroup/devices/slurm/uid_1000/job_42/step_0/task_0");
        let text = "5:memory:/slurm/uid_1000/job_42/step_0/task_0\n3:cpuacct:/slurm/uid_1000/job_42/step_0/task_0\n7:devices:/slurm/uid_1000/job_42/step_0/task_0\n";
        let cg = job_cgroup_from_lines(sys, text, "42").unwrap();
        assert_eq!(cg.version, Version::V1);
        assert_eq!(cg.dir, mem.parent().unwrap().parent().unwrap());
        assert_eq!(
            cg.cpuacct.as_deref(),
            Some(cpu.parent().unwrap().parent().unwrap())
        );
        // The devices hierarchy is found as cpuacct's is (it was once
        // guessed by replacing /memory/ in the memory folder's path).
        assert_eq!(
            cg.devices.as_deref(),
            Some(dev.parent().unwrap().parent().unwrap())
        );
        assert_eq!(find_slurm_job_cgroup(sys, "42", None).unwrap(), cg);
        assert!(find_slurm_job_cgroup(sys, "43", None).is_none());

        // v1, cpu and cpuacct co-mounted.
        let d2 = tempfile::tempdir().unwrap();
        let sys2 = d2.path();
        mkdirs(sys2, "fs/cgroup/memory/slurm/uid_0/job_7/step_batch");
        let cc = mkdirs(sys2, "fs/cgroup/cpu,cpuacct/slurm/uid_0/job_7/step_batch");
        let text = "11:memory:/slurm/uid_0/job_7/step_batch\n5:cpu,cpuacct:/slurm/uid_0/job_7/step_batch\n";
        let cg = job_cgroup_from_lines(sys2, text, "7").unwrap();
        assert_eq!(cg.cpuacct.as_deref(), Some(cc.parent().unwrap()));
        assert_eq!(find_slurm_job_cgroup(sys2, "7", None).unwrap(), cg);

        // v2.
        let d3 = tempfile::tempdir().unwrap();
        let sys3 = d3.path();
        fs::create_dir_all(sys3.join("fs/cgroup")).unwrap();
        fs::write(sys3.join("fs/cgroup/cgroup.controllers"), "cpu memory\n").unwrap();
        let task = mkdirs(
            sys3,
            "fs/cgroup/system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
        );
        let text = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0";
        let cg = job_cgroup_from_lines(sys3, text, "42").unwrap();
        assert_eq!(cg.version, Version::V2);
        assert!(task.starts_with(&cg.dir));
        assert!(cg.dir.ends_with("job_42"));
        assert_eq!(find_slurm_job_cgroup(sys3, "42", None).unwrap(), cg);
        // Multiple-slurmd naming.
        let d4 = tempfile::tempdir().unwrap();
        fs::create_dir_all(d4.path().join("fs/cgroup")).unwrap();
        fs::write(d4.path().join("fs/cgroup/cgroup.controllers"), "").unwrap();
        mkdirs(
            d4.path(),
            "fs/cgroup/system.slice/n1_slurmstepd.scope/job_9",
        );
        assert!(find_slurm_job_cgroup(d4.path(), "9", None).is_some());
        // Several slurmd on one host (slurmd -N): each node's own folder.
        let d5 = tempfile::tempdir().unwrap();
        let sys5 = d5.path();
        for n in ["n1", "n2"] {
            mkdirs(
                sys5,
                &format!("fs/cgroup/memory/slurm_{n}/uid_0/job_5/step_0"),
            );
            mkdirs(
                sys5,
                &format!("fs/cgroup/cpu,cpuacct/slurm_{n}/uid_0/job_5/step_0"),
            );
        }
        let on = |n| find_slurm_job_cgroup(sys5, "5", Some(n)).unwrap();
        assert!(
            on("n2").dir.ends_with("memory/slurm_n2/uid_0/job_5"),
            "{:?}",
            on("n2")
        );
        assert!(on("n1").dir.ends_with("memory/slurm_n1/uid_0/job_5"));
        assert!(on("n2")
            .cpuacct
            .unwrap()
            .ends_with("cpu,cpuacct/slurm_n2/uid_0/job_5"));
        let d6 = tempfile::tempdir().unwrap();
        fs::create_dir_all(d6.path().join("fs/cgroup")).unwrap();
        fs::write(d6.path().join("fs/cgroup/cgroup.controllers"), "").unwrap();
        for n in ["a", "b"] {
            mkdirs(
                d6.path(),
                &format!("fs/cgroup/system.slice/{n}_slurmstepd.scope/job_9"),
            );
        }
        let b = find_slurm_job_cgroup(d6.path(), "9", Some("b")).unwrap();
        assert!(b.dir.ends_with("b_slurmstepd.scope/job_9"), "{b:?}");
    }

    #[test]
    fn pids_are_listed_recursively_without_slurmstepd() {
        let d = tempfile::tempdir().unwrap();
        let job = mkdirs(d.path(), "job_1");
        let task = mkdirs(&job, "step_0/user/task_0");
        let stepd = mkdirs(&job, "step_0/slurm");
        fs::write(task.join("cgroup.procs"), "10\n11\n").unwrap();
        fs::write(stepd.join("cgroup.procs"), "99\n").unwrap();
        fs::write(job.join("cgroup.procs"), "").unwrap();
        let cg = JobCgroup::v2(job.clone());
        let mut buf = Vec::new();
        let mut pids = Vec::new();
        assert!(cg.list_pids_and_skipped(&mut buf, &mut pids).is_some());
        pids.sort();
        assert_eq!(pids, vec![10, 11]);
        fs::remove_dir_all(&job).unwrap();
        assert!(cg.list_pids_and_skipped(&mut buf, &mut pids).is_none());
    }
}
