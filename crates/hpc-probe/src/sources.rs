//! `hpc-probe --sources`: which data sources the probe finds on this node,
//! found by the code the sampler itself uses ([`cgroup::v2_mount`] and
//! [`cgroup::v1_mount`], [`perf::check`], [`NodeSources::discover`] and
//! [`NodeSources::read`], [`gpu::open_source`]), never by a second guess.
//!
//! One line per source, in the order of [`SOURCES`]:
//!
//! ```text
//! STATUS SOURCE DETAIL
//! ```
//!
//! `STATUS` is `ok` (the probe samples it), `absent` (not on this node,
//! or not readable by users by the node's design) or `fail` (there, but
//! broken in a way the probe cannot read although it should); `SOURCE` is
//! one of [`SOURCES`]; the two are followed by one space each and `DETAIL`
//! is the rest of the line: a short sentence, control characters escaped.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use hpc_core::paths::{escaped, shown};
use hpc_core::{Error, IoContext, Result};

use crate::node::{NodeReading, NodeSources};
use crate::{cgroup, gpu, perf, Args};

/// The sources, in the order they are printed.
pub const SOURCES: [&str; 7] = [
    "cgroup",
    "perf",
    "numa",
    "lustre",
    "rapl",
    "infiniband",
    "gpus",
];

/// What the probe makes of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Found and readable: the probe samples it.
    Ok,
    /// Not on this node (or kept from users by the node's set-up).
    Absent,
    /// There, but broken: the probe cannot read it although it should.
    Fail,
}

impl Status {
    /// `ok`, `absent` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Absent => "absent",
            Status::Fail => "fail",
        }
    }
}

/// One line of `--sources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// ok, absent or fail.
    pub status: Status,
    /// One of [`SOURCES`].
    pub source: &'static str,
    /// A short sentence for people.
    pub detail: String,
}

impl Line {
    fn new(status: Status, source: &'static str, detail: impl Into<String>) -> Line {
        Line {
            status,
            source,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Line {
    /// `STATUS SOURCE DETAIL`, single spaces, the detail on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.status.as_str(),
            self.source,
            escaped(&self.detail)
        )
    }
}

/// The trees the sources are looked for in.
#[derive(Debug, Clone)]
pub struct Roots {
    /// `--proc-root`.
    pub proc_root: PathBuf,
    /// `--sys-root`.
    pub sys_root: PathBuf,
    /// `--dev-root`.
    pub dev_root: PathBuf,
}

/// `--sources`: refuses a target or `--out`, prints the lines on stdout
/// and returns 0, whatever they say.
pub fn main(args: &Args, get: impl Fn(&str) -> Option<String>) -> Result<u8> {
    if args.job.is_some() || args.pid.is_some() || !args.command.is_empty() || args.out.is_some() {
        return Err(Error::Usage(
            "--sources watches nothing: give it no --job, --pid, --out or command".into(),
        ));
    }
    let roots = Roots {
        proc_root: args.proc_root.clone(),
        sys_root: args.sys_root.clone(),
        dev_root: args.dev_root.clone(),
    };
    let mut text = String::new();
    for l in check(&roots, args.no_perf, get) {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .ctx(|| "cannot write to stdout".into())?;
    Ok(0)
}

/// The seven lines, in the order of [`SOURCES`]. `get` reads the
/// environment (`HPC_PROBE_GPU_FIXTURE`, as the sampler does).
pub fn check(roots: &Roots, no_perf: bool, get: impl Fn(&str) -> Option<String>) -> Vec<Line> {
    let node = NodeSources::discover(&roots.proc_root, &roots.sys_root);
    let reading = node.read(&mut Vec::new());
    let perf = if no_perf {
        perf::Perf::Disabled
    } else {
        perf::check(&roots.proc_root)
    };
    vec![
        cgroup_line(&roots.sys_root),
        perf_line(&perf, &roots.proc_root),
        numa_line(&roots.sys_root, &node, &reading),
        lustre_line(roots, &node, &reading),
        rapl_line(&node, &reading),
        infiniband_line(&roots.sys_root, &node, &reading),
        gpus_line(&roots.dev_root, get),
    ]
}

/// `n thing` or `n things`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Why a file the probe found gave no reading: the error of reading it,
/// or, when it reads, that its text is not what the kernel writes there.
fn read_error(p: &Path) -> io::Error {
    match std::fs::read(p) {
        Err(e) => e,
        Ok(_) => io::Error::new(io::ErrorKind::InvalidData, "not in the kernel's format"),
    }
}

/// Where the probe looks for a job's cgroup (see
/// [`cgroup::find_slurm_job_cgroup`]): the v2 mount first, then the v1
/// memory and cpuacct hierarchies.
pub fn cgroup_line(sys_root: &Path) -> Line {
    const S: &str = "cgroup";
    let base = sys_root.join("fs/cgroup");
    let v2 = cgroup::v2_mount(sys_root);
    if let Some(m) = v2.as_ref().filter(|m| **m == base) {
        return Line::new(Status::Ok, S, format!("v2 (unified) at {}", shown(m)));
    }
    let mem = cgroup::v1_mount(sys_root, "memory", "memory");
    let cpu = cgroup::v1_mount(sys_root, "cpuacct", "cpuacct");
    let hybrid = v2
        .as_ref()
        .map(|u| format!(" (hybrid: v2 beside it at {})", shown(u)))
        .unwrap_or_default();
    match (&mem, &cpu) {
        (Some(m), Some(c)) => Line::new(
            Status::Ok,
            S,
            format!(
                "v1, memory controller at {}, cpuacct at {}{hybrid}",
                shown(m),
                shown(c)
            ),
        ),
        (Some(m), None) => Line::new(
            Status::Ok,
            S,
            format!(
                "v1, memory controller at {} (no cpuacct hierarchy: CPU time from /proc){hybrid}",
                shown(m)
            ),
        ),
        (None, Some(c)) => Line::new(
            Status::Ok,
            S,
            format!(
                "v1, cpuacct controller at {} (no memory hierarchy: memory from /proc){hybrid}",
                shown(c)
            ),
        ),
        (None, None) => match v2 {
            Some(u) => Line::new(
                Status::Ok,
                S,
                format!("v2 at {} (hybrid layout, no v1 memory or cpuacct hierarchy)", shown(&u)),
            ),
            None => Line::new(
                Status::Absent,
                S,
                format!(
                    "no cgroup file system found under {}: a job's processes are found by SLURM_JOB_ID in their environment",
                    shown(&base)
                ),
            ),
        },
    }
}

/// The hardware counters, as [`perf::check`] found them.
pub fn perf_line(p: &perf::Perf, proc_root: &Path) -> Line {
    const S: &str = "perf";
    const NONE: &str = "no CPI or cache-miss rates";
    match p {
        perf::Perf::Available { paranoid } => Line::new(
            Status::Ok,
            S,
            format!("counters available (perf_event_paranoid {paranoid}): CPI and cache-miss rates are sampled"),
        ),
        perf::Perf::Disabled => Line::new(Status::Absent, S, format!("disabled (--no-perf): {NONE}")),
        perf::Perf::NoSupport => Line::new(
            Status::Absent,
            S,
            format!(
                "no perf_event support in this kernel (or container), no {}: {NONE}",
                shown(&proc_root.join("sys/kernel/perf_event_paranoid"))
            ),
        ),
        perf::Perf::Paranoid(n) => Line::new(
            Status::Absent,
            S,
            format!("counters off for users: perf_event_paranoid is {n} (2 or less needed; admins: sysctl kernel.perf_event_paranoid=2)"),
        ),
        perf::Perf::Refused {
            paranoid, errno, why,
        } => match *errno {
            Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => Line::new(
                Status::Absent,
                S,
                format!("no hardware PMU (a virtual machine?): {NONE}"),
            ),
            Some(libc::EACCES) | Some(libc::EPERM) => Line::new(
                Status::Absent,
                S,
                format!("perf_event_open is refused although perf_event_paranoid is {paranoid} (a container's seccomp profile or a security module): {NONE}"),
            ),
            Some(libc::ENOSYS) => Line::new(
                Status::Absent,
                S,
                format!("no perf_event_open in this kernel: {NONE}"),
            ),
            _ => Line::new(Status::Fail, S, format!("the test counter fails ({why}): {NONE}")),
        },
    }
}

/// `node*` folders under `sys/devices/system/node`, named as
/// [`NodeSources::discover`] takes them.
fn numa_node_dirs(sys_root: &Path) -> usize {
    std::fs::read_dir(sys_root.join("devices/system/node")).map_or(0, |rd| {
        rd.flatten()
            .filter(|e| {
                e.file_name().to_str().is_some_and(|n| {
                    n.strip_prefix("node")
                        .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
                })
            })
            .count()
    })
}

/// NUMA: the nodes whose `numastat` the probe found and can read.
pub fn numa_line(sys_root: &Path, node: &NodeSources, reading: &NodeReading) -> Line {
    const S: &str = "numa";
    let dir = sys_root.join("devices/system/node");
    let found = node.numa.len();
    let read = reading.numa.iter().filter(|r| r.is_some()).count();
    if found == 0 {
        let dirs = numa_node_dirs(sys_root);
        if dirs == 0 {
            return Line::new(
                Status::Absent,
                S,
                format!(
                    "no NUMA information in {}: numa_misplaced is not evaluated",
                    shown(&dir)
                ),
            );
        }
        return Line::new(
            Status::Fail,
            S,
            format!(
                "{} under {} but no numastat in them: numa_misplaced is not evaluated",
                count(dirs, "NUMA node", "NUMA nodes"),
                shown(&dir)
            ),
        );
    }
    if read == 0 {
        return Line::new(
            Status::Fail,
            S,
            format!(
                "{} but {} cannot be read ({}): numa_misplaced is not evaluated",
                count(found, "NUMA node", "NUMA nodes"),
                shown(&node.numa[0]),
                read_error(&node.numa[0])
            ),
        );
    }
    let unread = if read < found {
        format!(" ({found} found, {read} with a readable numastat)")
    } else {
        String::new()
    };
    if read == 1 {
        Line::new(
            Status::Ok,
            S,
            format!("one NUMA node: numa_misplaced cannot be raised here{unread}"),
        )
    } else {
        Line::new(Status::Ok, S, format!("{read} NUMA nodes{unread}"))
    }
}

/// Lustre: the llite `stats` files the probe found and can read.
pub fn lustre_line(roots: &Roots, node: &NodeSources, reading: &NodeReading) -> Line {
    const S: &str = "lustre";
    let read = reading.lustre.iter().filter(|r| r.is_some()).count();
    if read > 0 {
        return Line::new(
            Status::Ok,
            S,
            format!(
                "Lustre client found: Lustre rates are sampled ({})",
                count(read, "file system", "file systems")
            ),
        );
    }
    if let Some(p) = node.lustre.first() {
        let e = read_error(p);
        return if e.kind() == io::ErrorKind::PermissionDenied {
            Line::new(
                Status::Absent,
                S,
                format!(
                    "Lustre client found but its llite stats are readable by root only ({}): no Lustre rates",
                    shown(p)
                ),
            )
        } else {
            Line::new(
                Status::Fail,
                S,
                format!(
                    "Lustre client found but {} cannot be read ({e}): no Lustre rates",
                    shown(p)
                ),
            )
        };
    }
    let proc_llite = roots.proc_root.join("fs/lustre/llite");
    let debug_llite = roots.sys_root.join("kernel/debug/lustre/llite");
    let client =
        roots.proc_root.join("fs/lustre").is_dir() || roots.sys_root.join("fs/lustre").is_dir();
    if !client {
        return Line::new(Status::Absent, S, "no Lustre client on this node");
    }
    let debug_denied = std::fs::read_dir(&debug_llite)
        .err()
        .is_some_and(|e| e.kind() == io::ErrorKind::PermissionDenied);
    if debug_denied {
        return Line::new(
            Status::Absent,
            S,
            format!(
                "Lustre client found but its llite stats are under {}, readable by root only: no Lustre rates",
                shown(&roots.sys_root.join("kernel/debug"))
            ),
        );
    }
    Line::new(
        Status::Absent,
        S,
        format!(
            "Lustre client found but no mounted file system's stats ({}/*/stats, {}/*/stats): no Lustre rates",
            shown(&proc_llite),
            shown(&debug_llite)
        ),
    )
}

/// RAPL: the top-level package domains' `energy_uj` the probe found and
/// can read.
pub fn rapl_line(node: &NodeSources, reading: &NodeReading) -> Line {
    const S: &str = "rapl";
    let read = reading.rapl.iter().filter(|r| r.is_some()).count();
    if read > 0 {
        return Line::new(
            Status::Ok,
            S,
            format!(
                "RAPL energy readable ({})",
                count(read, "package", "packages")
            ),
        );
    }
    let Some((first, _)) = node.rapl.first() else {
        return Line::new(Status::Absent, S, "no RAPL energy counters on this node");
    };
    let e = read_error(first);
    if e.kind() == io::ErrorKind::PermissionDenied {
        let paths: Vec<String> = node.rapl.iter().map(|(p, _)| shown(p)).collect();
        Line::new(
            Status::Absent,
            S,
            format!(
                "RAPL energy is readable by root only (admins: chmod o+r {} at boot)",
                paths.join(" ")
            ),
        )
    } else {
        Line::new(
            Status::Fail,
            S,
            format!("{} cannot be read ({e}): no energy", shown(first)),
        )
    }
}

/// The adapter a port counter file belongs to
/// (`class/infiniband/<adapter>/ports/...`).
fn adapter_of<'a>(ib_dir: &Path, p: &'a Path) -> Option<&'a str> {
    p.strip_prefix(ib_dir).ok()?.iter().next()?.to_str()
}

/// InfiniBand: the ports whose data counters the probe found and can read,
/// named by their adapters.
pub fn infiniband_line(sys_root: &Path, node: &NodeSources, reading: &NodeReading) -> Line {
    const S: &str = "infiniband";
    let ib_dir = sys_root.join("class/infiniband");
    let mut names: Vec<String> = Vec::new();
    let mut read = 0;
    for ((rcv, _), r) in node.ib.iter().zip(&reading.ib) {
        if r.is_none() {
            continue;
        }
        read += 1;
        if let Some(a) = adapter_of(&ib_dir, rcv) {
            if !names.iter().any(|n| n == a) {
                names.push(a.to_owned());
            }
        }
    }
    if read > 0 {
        return Line::new(
            Status::Ok,
            S,
            format!("{} ({})", names.join(" "), count(read, "port", "ports")),
        );
    }
    if let Some((rcv, _)) = node.ib.first() {
        return Line::new(
            Status::Fail,
            S,
            format!(
                "{} cannot be read ({}): no InfiniBand rates",
                shown(rcv),
                read_error(rcv)
            ),
        );
    }
    let mut adapters: Vec<String> = std::fs::read_dir(&ib_dir).map_or(Vec::new(), |rd| {
        rd.flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    });
    adapters.sort();
    if adapters.is_empty() {
        return Line::new(Status::Absent, S, "no InfiniBand adapters on this node");
    }
    Line::new(
        Status::Absent,
        S,
        format!(
            "{} without port data counters (ports/N/counters/port_rcv_data): no InfiniBand rates",
            adapters.join(" ")
        ),
    )
}

/// The NVIDIA GPU device files (`nvidiaN`) under `dev_root`, sorted.
pub fn nvidia_device_files(dev_root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dev_root).map_or(Vec::new(), |rd| {
        rd.flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| {
                n.strip_prefix("nvidia")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect()
    });
    v.sort_by_key(|n| n[6..].parse::<u64>().unwrap_or(u64::MAX));
    v
}

/// GPUs: what the probe's GPU source ([`gpu::open_source`]: the fixture
/// of `HPC_PROBE_GPU_FIXTURE`, else NVML) lists. Without NVML, the
/// `nvidiaN` device files under `dev_root` tell whether GPUs are there
/// that the probe cannot read.
pub fn gpus_line(dev_root: &Path, get: impl Fn(&str) -> Option<String>) -> Line {
    const S: &str = "gpus";
    let fixture = get(gpu::FIXTURE_ENV).is_some_and(|v| !v.is_empty());
    let via = if fixture {
        format!("read from {} (recorded NVML readings)", gpu::FIXTURE_ENV)
    } else {
        "read through NVML".to_string()
    };
    let files = nvidia_device_files(dev_root);
    let n_files = count(files.len(), "GPU device", "GPU devices");
    match gpu::open_source(&get) {
        Ok(mut src) => match src.devices() {
            Ok(d) if !d.is_empty() => Line::new(
                Status::Ok,
                S,
                format!(
                    "{} on this node, {via}",
                    count(d.len(), "GPU device", "GPU devices")
                ),
            ),
            Ok(_) if files.is_empty() || fixture => Line::new(
                Status::Absent,
                S,
                format!("no GPUs on this node ({} lists none)", src.name()),
            ),
            Ok(_) => Line::new(
                Status::Fail,
                S,
                format!(
                    "{n_files} under {} but NVML lists none: no GPU use is sampled",
                    shown(dev_root)
                ),
            ),
            Err(e) => Line::new(
                Status::Fail,
                S,
                format!(
                    "{} cannot list the GPUs ({e}): no GPU use is sampled",
                    src.name()
                ),
            ),
        },
        Err(why) if fixture => Line::new(Status::Fail, S, format!("{}: {why}", gpu::FIXTURE_ENV)),
        Err(why) if !files.is_empty() => Line::new(
            Status::Fail,
            S,
            format!(
                "{n_files} on this node ({}) but no GPU use is sampled: {why}",
                shown(&dev_root.join(&files[0]))
            ),
        ),
        Err(_) => {
            let amd = if dev_root.join("kfd").exists() {
                format!(
                    " ({} is there: AMD GPUs, which the probe does not read)",
                    shown(&dev_root.join("kfd"))
                )
            } else {
                String::new()
            };
            Line::new(Status::Absent, S, format!("no GPUs on this node{amd}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn a_line_is_status_source_detail_on_one_line() {
        let l = Line::new(Status::Absent, "rapl", "a\nb");
        assert_eq!(l.to_string(), "absent rapl a\\nb");
        assert_eq!(
            Line::new(Status::Ok, "numa", "2 NUMA nodes").to_string(),
            "ok numa 2 NUMA nodes"
        );
    }

    #[test]
    fn root_only_files_are_absent_with_the_admin_hint_other_failures_fail() {
        // Permission bits do not stop root: the classification is checked
        // on the error itself.
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        let f = sys.join("class/powercap/intel-rapl:0/energy_uj");
        write(&f, "12345\n");
        let node = NodeSources::discover(Path::new("/nonexistent"), sys);
        let unread = NodeReading {
            rapl: vec![None],
            ..Default::default()
        };
        // Readable but given no reading: the text is not the kernel's.
        let l = rapl_line(&node, &unread);
        assert_eq!(l.status, Status::Fail, "{l}");
        assert!(l.detail.contains("not in the kernel's format"), "{l}");
        let ok = rapl_line(&node, &node.read(&mut Vec::new()));
        assert_eq!(ok.to_string(), "ok rapl RAPL energy readable (1 package)");
        if nix::unistd::geteuid().is_root() {
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&f, fs::Permissions::from_mode(0o000)).unwrap();
        let l = rapl_line(&node, &node.read(&mut Vec::new()));
        assert_eq!(l.status, Status::Absent, "{l}");
        assert!(
            l.detail
                .starts_with("RAPL energy is readable by root only (admins: chmod o+r "),
            "{l}"
        );
    }

    #[test]
    fn numa_folders_without_numastat_fail_and_one_node_says_so() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        fs::create_dir_all(sys.join("devices/system/node/node0")).unwrap();
        fs::create_dir_all(sys.join("devices/system/node/node1")).unwrap();
        fs::create_dir_all(sys.join("devices/system/node/power")).unwrap();
        let node = NodeSources::discover(Path::new("/nonexistent"), sys);
        let l = numa_line(sys, &node, &node.read(&mut Vec::new()));
        assert_eq!(l.status, Status::Fail, "{l}");
        assert!(l.detail.starts_with("2 NUMA nodes under "), "{l}");
        write(
            &sys.join("devices/system/node/node0/numastat"),
            "numa_hit 10\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 0\nlocal_node 10\nother_node 0\n",
        );
        fs::remove_dir(sys.join("devices/system/node/node1")).unwrap();
        let node = NodeSources::discover(Path::new("/nonexistent"), sys);
        let l = numa_line(sys, &node, &node.read(&mut Vec::new()));
        assert_eq!(
            l.to_string(),
            "ok numa one NUMA node: numa_misplaced cannot be raised here"
        );
    }

    #[test]
    fn cgroup_layouts_as_the_probe_searches_them() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        let base = sys.join("fs/cgroup");
        let l = cgroup_line(sys);
        assert_eq!(l.status, Status::Absent);
        // Hybrid: v1 controllers with the v2 `unified` mount beside them.
        fs::create_dir_all(base.join("memory")).unwrap();
        fs::create_dir_all(base.join("cpu,cpuacct")).unwrap();
        fs::create_dir_all(base.join("unified")).unwrap();
        let l = cgroup_line(sys);
        assert_eq!(
            l.to_string(),
            format!(
                "ok cgroup v1, memory controller at {0}/memory, cpuacct at {0}/cpu,cpuacct (hybrid: v2 beside it at {0}/unified)",
                base.display()
            )
        );
        // Unified: `cgroup.controllers` at the top.
        let d2 = tempfile::tempdir().unwrap();
        write(
            &d2.path().join("fs/cgroup/cgroup.controllers"),
            "cpu memory\n",
        );
        assert_eq!(
            cgroup_line(d2.path()).to_string(),
            format!(
                "ok cgroup v2 (unified) at {}/fs/cgroup",
                d2.path().display()
            )
        );
    }

    #[test]
    fn gpu_device_files_are_nvidia_and_a_number() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            "nvidia10",
            "nvidia2",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia",
            "kfd",
        ] {
            fs::write(d.path().join(n), "").unwrap();
        }
        assert_eq!(nvidia_device_files(d.path()), vec!["nvidia2", "nvidia10"]);
        // A fixture with no GPU: none, whatever /dev holds.
        let empty = d.path().join("none.ndjson");
        fs::write(&empty, "").unwrap();
        let e = empty.to_str().unwrap().to_owned();
        let l = gpus_line(d.path(), |k| (k == gpu::FIXTURE_ENV).then(|| e.clone()));
        assert_eq!(
            l.to_string(),
            "absent gpus no GPUs on this node (fixture lists none)"
        );
        let l = gpus_line(d.path(), |k| {
            (k == gpu::FIXTURE_ENV).then(|| "/nonexistent/x".to_owned())
        });
        assert_eq!(l.status, Status::Fail, "{l}");
    }
}
