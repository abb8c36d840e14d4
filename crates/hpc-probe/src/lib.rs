//! hpc-probe: samples the processes of a SLURM job on this node (or a pid
//! and its descendants, or a command it runs) and writes one NDJSON line
//! per sample: a `meta` record first, then `sample` records.
//!
//! - [`parse`]: tiny parsers over /proc and /sys text;
//! - [`cgroup`]: finding a job's cgroup (v1, co-mounted v1, v2);
//! - [`node`]: node-level NUMA, Lustre, RAPL and InfiniBand counters;
//! - [`perf`]: hardware counters through `perf_event_open`;
//! - [`gpu`]: the job's GPUs, through NVML or recorded readings;
//! - [`sources`]: `--sources`, which of these the probe finds on this node;
//! - [`sampler`]: the per-process bookkeeping that turns readings into samples;
//! - [`run`]: the sampling loop, signals and output.

pub mod cgroup;
pub mod command;
pub mod gpu;
pub mod node;
pub mod opts;
pub mod parse;
pub mod perf;
pub mod sampler;
pub mod sources;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hpc_core::paths::shown;
use hpc_core::record::{write_tagged, Meta};
use hpc_core::{Error, IoContext, Result};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::Value;

pub use opts::{Args, Opts, Target};
pub use sampler::{read_file, read_into};

/// The whole tool, as every hpc-sizer binary's `main` calls it: checks
/// `args` (with the SLURM environment) and runs (or, with `--sources`,
/// prints the node's data sources: see [`sources`]). Returns the exit status
/// as [`run`] does.
pub fn main_with(args: Args) -> Result<u8> {
    if args.sources {
        return sources::main(&args, |k| std::env::var(k).ok());
    }
    let opts = Opts::from_args(args, |k| std::env::var(k).ok())?;
    run(&opts)
}

use sampler::{Config, Reaped, Sampler, Watch};

/// Where records go: stdout or a private file. Each record is written with
/// one `write_all` of a complete line and flushed; a failed write to a file
/// is cut back to the last complete line.
pub struct Output {
    sink: Sink,
    line: Vec<u8>,
    good_len: u64,
}

enum Sink {
    Stdout(std::io::Stdout),
    File {
        file: std::fs::File,
        path: PathBuf,
        // Held while the probe runs: a second probe on the file is refused.
        _lock: Option<Flock<std::fs::File>>,
        // This probe created the file (it did not exist before).
        created: bool,
    },
    Memory(Vec<u8>),
}

impl Output {
    /// Output to stdout (`None` or `-`) or to a private file, emptied: see
    /// [`open_output_file`].
    pub fn open(path: Option<&Path>) -> Result<Self> {
        let out = Self::open_kept(path)?;
        out.empty()?;
        Ok(out)
    }

    /// [`Output::open`], but a file is locked and not yet emptied: a
    /// command that cannot be run leaves an earlier file as it was (see
    /// [`Output::discard`]).
    fn open_kept(path: Option<&Path>) -> Result<Self> {
        let sink = match path {
            None => Sink::Stdout(std::io::stdout()),
            Some(p) if p.as_os_str() == "-" => Sink::Stdout(std::io::stdout()),
            Some(p) => {
                let (file, lock, created) = open_output_file(p)?;
                Sink::File {
                    file,
                    path: p.to_path_buf(),
                    _lock: lock,
                    created,
                }
            }
        };
        Ok(Output {
            sink,
            line: Vec::with_capacity(1024),
            good_len: 0,
        })
    }

    /// Empties a regular file opened by [`Output::open_kept`].
    fn empty(&self) -> Result<()> {
        if let Sink::File { file, path, .. } = &self.sink {
            if file.metadata().is_ok_and(|m| m.file_type().is_file()) {
                file.set_len(0)
                    .ctx(|| format!("cannot empty {}", shown(path)))?;
            }
        }
        Ok(())
    }

    /// Gives up an output nothing was written to: a file this probe
    /// created is removed, an earlier one is left as it was.
    fn discard(self) {
        if let Sink::File {
            path,
            created: true,
            ..
        } = &self.sink
        {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Output kept in memory (tests).
    pub fn memory() -> Self {
        Output {
            sink: Sink::Memory(Vec::new()),
            line: Vec::new(),
            good_len: 0,
        }
    }

    /// What a memory output holds.
    pub fn memory_text(&self) -> String {
        match &self.sink {
            Sink::Memory(v) => String::from_utf8_lossy(v).into_owned(),
            _ => String::new(),
        }
    }

    /// Writes one record as a whole line and flushes it.
    pub fn record<T: serde::Serialize>(&mut self, kind: &'static str, rec: &T) -> Result<()> {
        self.line.clear();
        write_tagged(&mut self.line, kind, rec)?;
        match &mut self.sink {
            Sink::Stdout(s) => {
                let mut l = s.lock();
                l.write_all(&self.line)
                    .and_then(|()| l.flush())
                    .ctx(|| "cannot write to stdout".into())
            }
            Sink::File { file: f, path, .. } => {
                let r = f.write_all(&self.line).and_then(|()| f.flush());
                match r {
                    Ok(()) => {
                        self.good_len += self.line.len() as u64;
                        Ok(())
                    }
                    Err(e) => {
                        // Keep the file valid up to its last complete line.
                        let _ = f.set_len(self.good_len);
                        Err(Error::Io {
                            context: format!("cannot write {}", shown(path)),
                            source: e,
                        })
                    }
                }
            }
            Sink::Memory(v) => {
                v.extend_from_slice(&self.line);
                Ok(())
            }
        }
    }
}

/// Opens the probe's output file for writing. The file is never reached
/// through a symbolic link (`O_NOFOLLOW`: an existing or dangling link is
/// refused), its folder is created with mode 0700, a new file gets mode
/// 0600. A regular file is locked (`flock`, exclusive), so a second probe
/// on the same file fails without touching it (the caller empties it once
/// locked); where the file system has no locks the file is used unlocked,
/// with a warning. Returns the file, the lock that must be kept, and
/// whether the file was created by this call.
pub fn open_output_file(p: &Path) -> Result<(std::fs::File, Option<Flock<std::fs::File>>, bool)> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(d) = p.parent() {
        hpc_core::paths::create_private_dir(d)?;
    }
    // Created here when an exclusive create succeeds; else opened as it is.
    let excl = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p);
    let created = excl.is_ok();
    let opened = excl.or_else(|_| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(p)
    });
    let file = match opened {
        Ok(f) => f,
        Err(e)
            if e.raw_os_error() == Some(libc::ELOOP)
                && std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            return Err(Error::Other(format!(
                "{} is a symbolic link: refusing to write through it",
                shown(p)
            )));
        }
        Err(e) => {
            return Err(Error::Io {
                context: format!("cannot create {}", shown(p)),
                source: e,
            })
        }
    };
    let meta = file
        .metadata()
        .ctx(|| format!("cannot stat {}", shown(p)))?;
    if !meta.file_type().is_file() {
        // A device or a FIFO: nothing to lock or empty.
        return Ok((file, None, created));
    }
    let dup = file
        .try_clone()
        .ctx(|| format!("cannot lock {}", shown(p)))?;
    let lock = match Flock::lock(dup, FlockArg::LockExclusiveNonblock) {
        Ok(l) => Some(l),
        Err((_, Errno::EWOULDBLOCK)) => {
            return Err(Error::Other(format!(
                "{} is being written by another hpc-probe (stop it first, or give another --out)",
                shown(p)
            )));
        }
        Err((_, e)) => {
            hpc_core::note!(
                "hpc-probe: cannot lock {} ({e}): a second probe on this file would not be noticed",
                shown(p)
            );
            None
        }
    };
    // An existing file keeps its old mode through open(): tighten it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .ctx(|| format!("cannot chmod {}", shown(p)))?;
    Ok((file, lock, created))
}

/// Wakes the sampling loop early on a signal.
struct Waker {
    rx: UnixStream,
    stop: Arc<AtomicBool>,
}

impl Waker {
    fn install(chld: bool) -> Result<Waker> {
        let (rx, tx) = UnixStream::pair().ctx(|| "cannot create the signal pipe".into())?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut sigs = vec![
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGHUP,
        ];
        for &s in &sigs {
            signal_hook::flag::register(s, Arc::clone(&stop))
                .ctx(|| "cannot install a signal handler".into())?;
        }
        if chld {
            sigs.push(signal_hook::consts::SIGCHLD);
        }
        tx.set_nonblocking(true)
            .ctx(|| "cannot set up the signal pipe".into())?;
        for s in sigs {
            let tx = tx
                .try_clone()
                .ctx(|| "cannot set up the signal pipe".into())?;
            signal_hook::low_level::pipe::register(s, tx)
                .ctx(|| "cannot install a signal handler".into())?;
        }
        Ok(Waker { rx, stop })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps until `d` has passed or a signal arrives.
    fn sleep(&self, d: Duration) {
        use std::io::Read;
        let end = Instant::now() + d;
        let mut b = [0u8; 64];
        loop {
            if self.stopped() {
                return;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left < Duration::from_millis(1) {
                return;
            }
            let _ = self.rx.set_read_timeout(Some(left));
            match (&self.rx).read(&mut b) {
                Ok(_) => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The node's name: SLURM's (SLURMD_NODENAME) inside a job, which is what
/// sacct's NodeList says and differs from the host name on a host with
/// several slurmd; else the host name.
fn host_name(opts: &Opts) -> String {
    if let Some(n) = &opts.env.node_name {
        return n.clone();
    }
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".into())
}

fn sysconf(var: nix::unistd::SysconfVar, default: i64) -> i64 {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .filter(|&v| v > 0)
        .unwrap_or(default)
}

/// The next interval: the minimum while dense or after a change, else
/// relaxed by half up to the maximum.
pub fn next_interval(opts: &Opts, current: f64, elapsed: f64, changed: bool) -> f64 {
    if elapsed < opts.dense_for || changed {
        return opts.interval;
    }
    (current * 1.5).min(opts.max_interval).max(opts.interval)
}

/// Whether two samples differ enough to sample densely again: RSS by more
/// than 10 % or busy cores by more than half a core.
pub fn changed(a: &hpc_core::record::Sample, b: &hpc_core::record::Sample) -> bool {
    let rss = match (a.rss_mb, b.rss_mb) {
        (Some(x), Some(y)) => {
            let base = x.max(1.0);
            (y - x).abs() / base > 0.10
        }
        _ => false,
    };
    let cores = match (a.cpu_cores, b.cpu_cores) {
        (Some(x), Some(y)) => (y - x).abs() > 0.5,
        _ => false,
    };
    rss || cores
}

/// Runs the probe. Returns the exit status: the command's own status when
/// it ran one, else 0. With nothing to watch (no such pid, no process of
/// the job on this node after one interval) it fails before writing
/// anything; with a command, the command never outlives the probe (see
/// [`command`]).
pub fn run(opts: &Opts) -> Result<u8> {
    let waker = Waker::install(matches!(opts.target, Target::Command(_)))?;
    let (watch, out, mut child) = match start_target(opts) {
        // A command that cannot be run exits as a shell's would: 127 when
        // it is not found, 126 when it cannot be executed (it was 1).
        Err(Error::Io { context, source }) if context.starts_with(command::CANNOT_RUN) => {
            hpc_core::note!("hpc-probe: {context}: {source}");
            return Ok(match source.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            });
        }
        other => other?,
    };
    let node = node::NodeSources::discover(&opts.proc_root, &opts.sys_root);
    let perf_state = if opts.no_perf {
        perf::Perf::Disabled
    } else {
        perf::check(&opts.proc_root)
    }
    .state();
    let host = host_name(opts);
    let start = now_unix();
    let mut meta = build_meta(opts, &watch, &node, &perf_state, &host, start);
    let gpus = open_gpus(opts, &watch);
    gpu::meta_fields(&gpus, &mut meta.extra);
    let cfg = Config {
        proc_root: opts.proc_root.clone(),
        watch,
        pss: opts.pss,
        perf: perf_state.is_ok(),
        cpus: opts.cpus,
        clk_tck: sysconf(nix::unistd::SysconfVar::CLK_TCK, 100) as f64,
        page_size: sysconf(nix::unistd::SysconfVar::PAGE_SIZE, 4096) as u64,
        self_pid: std::process::id(),
        host: Some(host),
        job_id: meta.job_id.clone(),
        detail_every: opts.detail_every,
    };
    let mut sampler = Sampler::new(cfg, node);
    sampler.set_gpus(gpus.ok());
    if child.is_none() {
        await_target(&mut sampler, opts, &waker)?;
    }
    let mut out = match out {
        Some(o) => o,
        None => Output::open(opts.out.as_deref())?,
    };
    // The first cgroup reading decides where each figure comes from.
    let first = sampler.cgroup_counters();
    meta.extra
        .insert("source".into(), Value::Object(sampler.sources()));
    if sampler.cgroup_path() {
        meta.extra
            .insert("detail_every".into(), Value::from(opts.detail_every));
    }
    out.record("meta", &meta)?;
    sample_until_done(opts, &waker, &mut sampler, &mut out, child.as_mut(), first)
}

/// What to watch. A command is started only once its output is open (and
/// locked): for a command the output and the running command come back
/// too.
fn start_target(opts: &Opts) -> Result<(Watch, Option<Output>, Option<command::RunningCommand>)> {
    Ok(match &opts.target {
        Target::Command(argv) => {
            let out = Output::open_kept(opts.out.as_deref())?;
            let c = match command::RunningCommand::start(argv) {
                Ok(c) => c,
                Err(e) => {
                    out.discard();
                    return Err(e);
                }
            };
            out.empty()?;
            (Watch::Pid(c.pid()), Some(out), Some(c))
        }
        Target::Pid(p) => (Watch::Pid(*p), None, None),
        Target::Job(id) => {
            // The probe's own cgroup when it runs inside the job (srun
            // --overlap, a TaskProlog), else this node's, else any process's.
            let node = opts.env.node_name.as_deref();
            let cgroup = own_job_cgroup(&opts.proc_root, &opts.sys_root, id)
                .or_else(|| cgroup::find_slurm_job_cgroup(&opts.sys_root, id, node))
                .or_else(|| find_cgroup_via_proc(&opts.proc_root, &opts.sys_root, id));
            let watch = Watch::Job {
                id: id.clone(),
                cgroup,
            };
            (watch, None, None)
        }
    })
}

/// The sampling loop: one sample a round until the command exits, a
/// signal stops the probe, the watched processes are gone (or the job
/// cgroup, or one of the files read from it) or `--samples` are written;
/// the interval relaxes while the samples stay alike. A sample known to be
/// the last reads the per-process detail. `first`: the cgroup counters
/// read for the meta, which the first sample uses.
fn sample_until_done(
    opts: &Opts,
    waker: &Waker,
    sampler: &mut Sampler,
    out: &mut Output,
    mut child: Option<&mut command::RunningCommand>,
    first: Option<cgroup::CgCounters>,
) -> Result<u8> {
    let mut first = Some(first);
    let t0 = Instant::now();
    let mut interval = opts.interval;
    let mut last: Option<hpc_core::record::Sample> = None;
    let mut count: u64 = 0;
    loop {
        let exited = match child.as_deref_mut() {
            Some(c) => reap(c, sampler)?,
            None => None,
        };
        let final_round =
            exited.is_some() || waker.stopped() || opts.samples.is_some_and(|m| count + 1 >= m);
        if final_round {
            sampler.detail_next();
        }
        let cg = match first.take() {
            Some(c) => c,
            None => sampler.cgroup_counters(),
        };
        let s = sampler.sample(now_unix(), t0.elapsed().as_secs_f64(), cg);
        out.record("sample", &s)?;
        for g in sampler.gpu_records() {
            out.record("gpu", g)?;
        }
        count += 1;
        if let Some(status) = exited {
            return Ok(status);
        }
        if waker.stopped() {
            // The command, when there is one, stops with the probe.
            if let Some(c) = child.as_deref_mut() {
                c.stop();
            }
            return Ok(0);
        }
        // The target was seen (await_target): none left means it ended.
        let gone = child.is_none() && (sampler.process_count() == 0 || sampler.cgroup_ended());
        if gone || opts.samples.is_some_and(|m| count >= m) {
            return Ok(0);
        }
        let elapsed = t0.elapsed().as_secs_f64();
        let ch = last.as_ref().is_some_and(|l| changed(l, &s));
        interval = next_interval(opts, interval, elapsed, ch);
        last = Some(s);
        waker.sleep(Duration::from_secs_f64(interval));
    }
}

/// When the command has exited: its exit status, after handing its whole
/// CPU use, storage I/O and largest process's peak
/// (`getrusage(RUSAGE_CHILDREN)`) to the sampler.
fn reap(c: &mut command::RunningCommand, sampler: &mut Sampler) -> Result<Option<u8>> {
    let Some(st) = c.try_wait()? else {
        return Ok(None);
    };
    if let Ok(ru) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
        let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        // ru_maxrss is in KiB on Linux; the blocks are 512 bytes.
        let n = |v: nix::libc::c_long| u64::try_from(v).unwrap_or(0);
        sampler.root_reaped(Reaped {
            user_s: tv(ru.user_time()),
            sys_s: tv(ru.system_time()),
            max_rss_kb: n(ru.max_rss()),
            read_bytes: n(ru.block_reads()).saturating_mul(512),
            write_bytes: n(ru.block_writes()).saturating_mul(512),
        });
    }
    Ok(Some(exit_status_code(st)))
}

/// Waits for the pid or job to have a process: at once for a pid, within
/// one interval for a job (whose processes may still be starting). Fails
/// with nothing to watch.
fn await_target(sampler: &mut Sampler, opts: &Opts, waker: &Waker) -> Result<()> {
    if sampler.find_processes() > 0 {
        return Ok(());
    }
    if let Target::Job(_) = opts.target {
        waker.sleep(Duration::from_secs_f64(opts.interval));
        if sampler.find_processes() > 0 {
            return Ok(());
        }
    }
    Err(Error::Other(match &opts.target {
        Target::Job(id) => {
            let id = hpc_core::paths::escaped(id);
            format!(
            "nothing to watch: job {id} has no process on this node (none in its cgroup or with SLURM_JOB_ID={id} in its environment)"
        )
        }
        Target::Pid(p) => format!(
            "nothing to watch: no process {p} under {}",
            shown(&opts.proc_root)
        ),
        Target::Command(_) => "nothing to watch".into(),
    }))
}

fn exit_status_code(st: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 1,
    }
}

/// The job's GPUs and their source, or why there are none to read.
fn open_gpus(opts: &Opts, watch: &Watch) -> std::result::Result<gpu::Gpus, String> {
    let get = |k: &str| opts.env.get(k);
    let list = devices_list(watch);
    let wanted = gpu::wanted(get, list.as_deref());
    if wanted == gpu::Wanted::None {
        return Err("the job has no GPU".into());
    }
    gpu::Gpus::new(gpu::open_source(get)?, &wanted)
}

/// The text of a v1 job cgroup's `devices.list`, when the devices
/// hierarchy has the job.
fn devices_list(watch: &Watch) -> Option<String> {
    let Watch::Job {
        cgroup: Some(cg), ..
    } = watch
    else {
        return None;
    };
    std::fs::read_to_string(cg.devices.as_ref()?.join("devices.list")).ok()
}

/// Looks through `/proc/*/cgroup` for a process in the job's cgroup.
/// The job's cgroup as the probe's own `/proc/self/cgroup` names it (the
/// probe runs inside the job on this node); `None` outside the job.
fn own_job_cgroup(proc_root: &Path, sys_root: &Path, job: &str) -> Option<cgroup::JobCgroup> {
    cgroup_of(&proc_root.join("self"), sys_root, job, &mut Vec::new())
}

/// The job's cgroup as the first process of the job found in `proc_root`
/// names it.
fn find_cgroup_via_proc(proc_root: &Path, sys_root: &Path, job: &str) -> Option<cgroup::JobCgroup> {
    let mut buf = Vec::new();
    std::fs::read_dir(proc_root)
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .find_map(|e| cgroup_of(&e.path(), sys_root, job, &mut buf))
}

/// The job's cgroup named by the `cgroup` file of the process folder
/// `pid_dir`, when the process is in the job.
fn cgroup_of(
    pid_dir: &Path,
    sys_root: &Path,
    job: &str,
    buf: &mut Vec<u8>,
) -> Option<cgroup::JobCgroup> {
    if !read_into(&pid_dir.join("cgroup"), buf) {
        return None;
    }
    let text = std::str::from_utf8(buf).ok()?;
    text.contains(&format!("/job_{job}"))
        .then(|| cgroup::job_cgroup_from_lines(sys_root, text, job))
        .flatten()
}

fn build_meta(
    opts: &Opts,
    watch: &Watch,
    node: &node::NodeSources,
    perf_state: &std::result::Result<(), String>,
    host: &str,
    start: f64,
) -> Meta {
    let mut extra = serde_json::Map::new();
    match watch {
        Watch::Job {
            cgroup: Some(cg), ..
        } => {
            let (v, p) = cg.describe();
            extra.insert("cgroup_version".into(), Value::from(v));
            extra.insert("cgroup_path".into(), Value::from(p));
        }
        Watch::Job { cgroup: None, .. } => {
            extra.insert("cgroup_version".into(), Value::Null);
            extra.insert("job_match".into(), Value::from("environ"));
        }
        Watch::Pid(p) => {
            extra.insert("pid".into(), Value::from(*p));
        }
    }
    if let Target::Command(argv) = &opts.target {
        extra.insert("command".into(), Value::from(argv.clone()));
    }
    extra.insert("numa_nodes".into(), Value::from(node.numa.len()));
    extra.insert("lustre_mounts".into(), Value::from(node.lustre.len()));
    extra.insert("rapl_domains".into(), Value::from(node.rapl.len()));
    extra.insert("ib_ports".into(), Value::from(node.ib.len()));
    extra.insert("perf".into(), Value::from(perf_state.is_ok()));
    if let Err(why) = perf_state {
        extra.insert("perf_reason".into(), Value::from(why.as_str()));
    }
    extra.insert("probe_pid".into(), Value::from(std::process::id()));
    extra.insert("pss".into(), Value::from(opts.pss));
    extra.insert(
        "proc_root".into(),
        Value::from(opts.proc_root.display().to_string()),
    );
    extra.insert(
        "sys_root".into(),
        Value::from(opts.sys_root.display().to_string()),
    );
    Meta {
        // Outside SLURM a run still needs an id to be merged and stored by:
        // `local-<start>-<pid>` cannot collide with a SLURM job id.
        job_id: match &opts.target {
            Target::Job(id) => Some(id.clone()),
            _ => opts
                .env
                .job_id
                .clone()
                .or_else(|| Some(format!("local-{}-{}", start as u64, std::process::id()))),
        },
        step: opts.env.step.clone(),
        host: host.to_string(),
        start,
        interval_s: opts.interval,
        max_interval_s: Some(opts.max_interval),
        // --cpus, else SLURM_CPUS_ON_NODE: hpc-merge reads the request
        // here (it dropped cpu_frac and idle_cpu went unevaluated).
        req_cpus: opts.cpus,
        req_mem_mb: opts.env.req_mem_mb(),
        req_gpus: opts.env.gpus_on_node,
        nnodes: opts.env.nnodes,
        target: Some(
            match opts.target {
                Target::Job(_) => "job",
                Target::Pid(_) => "pid",
                Target::Command(_) => "command",
            }
            .into(),
        ),
        probe_version: env!("CARGO_PKG_VERSION").into(),
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpc_core::record::Sample;

    #[test]
    fn interval_relaxes_when_steady_and_tightens_on_change() {
        let o = Opts::for_test(Target::Pid(1));
        assert_eq!(
            next_interval(&o, 1.0, 10.0, false),
            1.0,
            "dense first minute"
        );
        assert_eq!(next_interval(&o, 1.0, 61.0, false), 1.5);
        assert_eq!(next_interval(&o, 20.0, 500.0, false), 30.0, "capped");
        assert_eq!(
            next_interval(&o, 30.0, 500.0, true),
            1.0,
            "back to the minimum"
        );
        let a = Sample {
            rss_mb: Some(100.0),
            cpu_cores: Some(1.0),
            ..Default::default()
        };
        let mut b = a.clone();
        b.rss_mb = Some(109.0);
        assert!(!changed(&a, &b));
        b.rss_mb = Some(111.0);
        assert!(changed(&a, &b));
        b.rss_mb = Some(100.0);
        b.cpu_cores = Some(1.6);
        assert!(changed(&a, &b));
    }

    #[test]
    fn output_lines_have_kind_first() {
        let mut o = Output::memory();
        o.record(
            "sample",
            &Sample {
                t: 1.5,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(o.memory_text(), "{\"kind\":\"sample\",\"t\":1.5}\n");
    }
}
