//! The real binary on real processes: memory, CPU, short-lived children,
//! churn, signals, kill -9, exit codes, help and the man page.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hpc_testkit::{first_line, num, records, show, status_to, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-probe"));

fn bin() -> Command {
    let mut c = TOOL.command(&[]);
    c.env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_CPUS_ON_NODE");
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run hpc-probe")
}

fn samples(recs: &[Value]) -> Vec<&Value> {
    recs.iter().filter(|r| r["kind"] == "sample").collect()
}

/// CPU-heavy tests run one at a time, so one's load does not skew
/// another's busy-core figures on a small CI machine.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

fn python() -> Command {
    Command::new("python3")
}

/// Waits for a child with a deadline, killing it when it overruns.
fn wait_for(c: &mut Child, secs: u64) -> std::process::ExitStatus {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = c.kill();
            panic!("process {} overran {secs} s", c.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_all(c: &mut Child) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = c.stdout.take() {
        o.read_to_string(&mut out).unwrap();
    }
    if let Some(mut e) = c.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (out, err)
}

#[test]
fn help_lists_every_flag_and_the_man_page_documents_them() {
    let o = run(&["--help"]);
    assert!(o.status.success(), "{}", show(&o));
    let help = String::from_utf8(o.stdout).unwrap();
    let flags = TOOL.assert_help_in_man(&help).len();
    let man = TOOL.man_page();
    assert!(flags >= 12, "found {flags} flags in help");
    for sec in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "OUTPUT",
        "EXIT STATUS",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        assert!(man.lines().any(|l| l == format!(".SH {sec}")), "{sec}");
    }
    for field in [
        "rss_mb",
        "hwm_mb",
        "swap_mb",
        "pss_mb",
        "cpu_user_s",
        "cpu_sys_s",
        "cpu_cores",
        "cpu_frac",
        "threads",
        "procs",
        "read_mb",
        "write_mb",
        "read_mbps",
        "write_mbps",
        "numa_miss_rate",
        "lustre_read_mbps",
        "lustre_write_mbps",
        "lustre_meta_ops",
        "cpi",
        "cache_miss_rate",
        "energy_j",
        "power_w",
        "ib_rx_mbps",
        "ib_tx_mbps",
    ] {
        let documented = tags(&man)
            .iter()
            .any(|l| l.split([' ', ',', '"']).any(|w| w == field));
        assert!(documented, "man page OUTPUT lacks {field}");
    }
}

/// The tag lines of the man page's `.TP` items: `.B rss_mb`,
/// `.BR read_mb ", " write_mb`.
fn tags(man: &str) -> Vec<&str> {
    let lines: Vec<&str> = man.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].starts_with(".TP") && w[1].starts_with(".B"))
        .map(|w| w[1])
        .collect()
}

#[test]
fn usage_errors_exit_2() {
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("hpc-probe: "));
    let o = run(&["--pid", "1", "--job", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let o = run(&["--pid", "1", "--interval", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

#[test]
fn a_command_gone_before_any_reading_has_no_memory_figures() {
    // `true` ends before the first reading: its sample said rss_mb 0 and
    // hwm_mb 0, which hpc-flags took for a peak of 0 MB (memory asked for
    // and never used); the man page says an absent source is left out.
    let o = run(&["--no-perf", "--", "true"]);
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let last = samples(&recs).last().cloned().expect("a last sample");
    assert_eq!(last["procs"], 0);
    // Left out, unless the command was read while it ran (then its peak
    // is a real one, above 0).
    match last.get("hwm_mb") {
        None => assert!(last.get("rss_mb").is_none(), "{last}"),
        Some(h) => assert!(h.as_f64().unwrap() > 0.0, "{last}"),
    }
}

#[test]
fn command_exit_status_is_passed_through() {
    let o = run(&["--", "false"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let o = run(&["--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    assert_eq!(recs[0]["kind"], "meta");
    assert_eq!(recs[0]["target"], "command");
    assert!(!samples(&recs).is_empty(), "a last sample");
    // Outside SLURM the run gets a local id that merge and store can key on.
    let id = recs[0]["job_id"].as_str().unwrap();
    assert!(id.starts_with("local-"), "{id}");
    assert!(samples(&recs).iter().all(|s| s["job_id"] == id));
    // A command that cannot be run exits as a shell says (it was 1): 127
    // not found, 126 not executable.
    let o = run(&["--", "/nonexistent/cmd"]);
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run /nonexistent/cmd"));
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.sh");
    std::fs::write(&plain, "true\n").unwrap();
    let o = run(&["--", plain.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126), "{}", show(&o));
    // ... and leaves --out as it found it: no empty file made, an earlier
    // series not emptied (a typo in the command lost it).
    let new = dir.path().join("new.ndjson");
    let o = run(&["--out", new.to_str().unwrap(), "--", "/nonexistent/cmd"]);
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
    assert!(!new.exists(), "an empty output file was left");
    let old = dir.path().join("old.ndjson");
    std::fs::write(&old, "{\"kind\":\"meta\"}\n").unwrap();
    let o = run(&[
        "--out",
        old.to_str().unwrap(),
        "--",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(126), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(&old).unwrap(),
        "{\"kind\":\"meta\"}\n"
    );
    // A command that runs empties it as before.
    let o = run(&["--out", old.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(records(&std::fs::read_to_string(&old).unwrap())[0]["target"] == "command");
}

#[test]
fn a_missing_pid_is_an_error() {
    let o = run(&["--pid", "2147483646", "--samples", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no process"));
}

#[test]
fn memory_peak_of_a_300_mb_child() {
    let _heavy = heavy();
    let o = run(&[
        "--interval", "0.25", "--",
        "python3", "-c",
        "import time\nb = bytearray(300 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\ntime.sleep(1.5)\n",
    ]);
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let s = samples(&recs);
    let peak = s.iter().map(|v| num(v, "hwm_mb")).fold(0.0, f64::max);
    let rss = s.iter().map(|v| num(v, "rss_mb")).fold(0.0, f64::max);
    assert!((300.0..=360.0).contains(&peak), "peak {peak} MiB");
    assert!(rss > 290.0 && rss <= peak + 0.01, "rss {rss}, peak {peak}");
}

#[test]
fn the_peak_of_a_command_gone_between_readings_is_kept() {
    // 150 MiB for a moment, then the command exits, all within the first
    // interval: the peak was read from no VmHWM and lost (0.5-8 MiB for a
    // 100 MiB perl run of 0.16 s); getrusage's ru_maxrss keeps it.
    let _heavy = heavy();
    let o = run(&[
        "--interval",
        "2",
        "--",
        "python3",
        "-c",
        "b = b'x' * (150 * 1024 * 1024)",
    ]);
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let s = samples(&recs);
    let peak = s.iter().map(|v| num(v, "hwm_mb")).fold(0.0, f64::max);
    assert!((150.0..=220.0).contains(&peak), "peak {peak} MiB: {s:?}");
}

#[test]
fn the_io_of_a_command_gone_between_readings_is_kept() {
    // 40 MiB written to storage and the command gone within the first
    // interval: the I/O since the last reading was lost (192 of 200 MiB
    // read by a dd). ru_oublock (write_bytes / 512) keeps it.
    let _heavy = heavy();
    // On the target's disk: /tmp may be a tmpfs, whose writes reach no
    // storage.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = dir.path().join("zeros");
    let of = format!("of={}", out.display());
    let o = run(&[
        "--interval",
        "5",
        "--",
        "dd",
        "if=/dev/zero",
        &of,
        "bs=1M",
        "count=40",
        "conv=fsync",
    ]);
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let last = *samples(&recs).last().unwrap();
    let written = num(last, "write_mb");
    assert!(
        (40.0..=44.0).contains(&written),
        "wrote {written} MiB: {last:?}"
    );
}

#[test]
fn one_busy_core_for_three_seconds() {
    let _heavy = heavy();
    let t = Instant::now();
    let o = run(&[
        "--interval",
        "0.5",
        "--",
        "python3",
        "-c",
        "import time\nwhile time.process_time() < 3.0:\n    pass\n",
    ]);
    let wall = t.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let s = samples(&recs);
    let last = s.last().unwrap();
    let cpu = num(last, "cpu_user_s") + num(last, "cpu_sys_s");
    assert!((2.9..=3.6).contains(&cpu), "cpu seconds {cpu}");
    // Busy samples: every full interval between the first and the last.
    let mut busy: Vec<f64> = s[1..s.len() - 1]
        .iter()
        .map(|v| num(v, "cpu_cores"))
        .collect();
    assert!(busy.len() >= 3, "{} busy samples", busy.len());
    busy.sort_by(f64::total_cmp);
    let median = busy[busy.len() / 2];
    assert!(busy.iter().all(|&c| c <= 1.3), "{busy:?}");
    // What the burner really got: on an idle machine a whole core. On a
    // machine shared with other work it gets less, and the probe must say
    // so rather than report a core it did not have.
    let got = cpu / wall;
    if got >= 0.85 {
        assert!(
            (0.7..=1.3).contains(&median),
            "median busy cores {median}: {busy:?}"
        );
    } else {
        eprintln!("machine busy: the burner got {got:.2} cores");
        assert!(
            (median - got).abs() <= 0.3,
            "median {median} vs {got:.2} cores actually used: {busy:?}"
        );
    }
}

#[test]
fn two_hundred_short_children_lose_no_cpu_time() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("rusage");
    // The parent forks 200 children at once, each burning ~10 ms of CPU,
    // reaps them (their time goes to its cutime/cstime), writes what the
    // kernel says they used, then lingers so the probe reads its stat.
    let script = format!(
        "import os, resource, time\n\
         time.sleep(0.6)\n\
         pids = []\n\
         for i in range(200):\n\
         \x20   p = os.fork()\n\
         \x20   if p == 0:\n\
         \x20       t = time.process_time()\n\
         \x20       while time.process_time() - t < 0.01:\n\
         \x20           pass\n\
         \x20       os._exit(0)\n\
         \x20   pids.append(p)\n\
         for p in pids:\n\
         \x20   os.waitpid(p, 0)\n\
         r = resource.getrusage(resource.RUSAGE_CHILDREN)\n\
         open('{}', 'w').write('%f' % (r.ru_utime + r.ru_stime))\n\
         time.sleep(1.2)\n",
        report.display()
    );
    let mut parent = python().arg("-c").arg(&script).spawn().unwrap();
    let mut probe = bin()
        .args([
            "--pid",
            &parent.id().to_string(),
            "--interval",
            "1",
            "--no-perf",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(&mut parent, 60).success());
    let st = wait_for(&mut probe, 10);
    let (out, err) = read_all(&mut probe);
    assert!(st.success(), "{err}");
    let children: f64 = fs::read_to_string(&report).unwrap().parse().unwrap();
    assert!(children >= 1.5, "200 x 10 ms: {children}");
    let recs = records(&out);
    let last = *samples(&recs).last().unwrap();
    let cpu = num(last, "cpu_user_s") + num(last, "cpu_sys_s");
    // The probe sees the parent's own time too (python start-up, forks).
    assert!(
        cpu >= children * 0.97 - 0.02 && cpu <= children + 1.5,
        "probe {cpu} s vs children {children} s"
    );
}

#[test]
fn churn_gives_samples_without_errors_or_gaps() {
    let _heavy = heavy();
    let secs: u64 = std::env::var("HPC_PROBE_CHURN_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let script = format!(
        "end=$(( $(date +%s) + {secs} )); while [ $(date +%s) -lt $end ]; do \
         for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait; done"
    );
    let mut churn = Command::new("sh").arg("-c").arg(&script).spawn().unwrap();
    let mut probe = bin()
        .args([
            "--pid",
            &churn.id().to_string(),
            "--interval",
            "0.2",
            "--max-interval",
            "0.6",
            "--dense-for",
            "0",
            "--no-perf",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out_thread = {
        let mut so = probe.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            so.read_to_string(&mut s).unwrap();
            s
        })
    };
    assert!(wait_for(&mut churn, secs + 30).success());
    let st = wait_for(&mut probe, 10);
    let out = out_thread.join().unwrap();
    let (_, err) = read_all(&mut probe);
    assert!(st.success(), "{err}");
    assert!(err.is_empty(), "stderr: {err}");
    let recs = records(&out);
    let s = samples(&recs);
    assert!(s.len() as u64 >= secs, "{} samples in {secs} s", s.len());
    let mut prev_cpu = 0.0;
    for w in s.windows(2) {
        let gap = num(w[1], "t") - num(w[0], "t");
        assert!(gap <= 0.6 + 0.5, "gap of {gap} s");
        let cpu = num(w[1], "cpu_user_s") + num(w[1], "cpu_sys_s");
        assert!(cpu + 1e-9 >= prev_cpu, "cumulative CPU went back");
        prev_cpu = cpu;
    }
}

fn start_sleeper() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

#[test]
fn sigterm_writes_a_last_sample_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spool/job/node.ndjson");
    let mut sleeper = start_sleeper();
    let mut probe = bin()
        .args([
            "--pid",
            &sleeper.id().to_string(),
            "--interval",
            "5",
            "--out",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(probe.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = wait_for(&mut probe, 10);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "woke early from a 5 s interval"
    );
    assert_eq!(st.code(), Some(0));
    let text = fs::read_to_string(&out).unwrap();
    let recs = records(&text);
    assert_eq!(recs[0]["kind"], "meta");
    assert_eq!(
        samples(&recs).len(),
        2,
        "first sample and the last one on SIGTERM"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn kill_9_leaves_only_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.ndjson");
    let mut sleeper = start_sleeper();
    let mut probe = bin()
        .args([
            "--pid",
            &sleeper.id().to_string(),
            "--interval",
            "0.05",
            "--out",
        ])
        .arg(&out)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    probe.kill().unwrap();
    probe.wait().unwrap();
    let text = fs::read_to_string(&out).unwrap();
    assert!(text.ends_with('\n'));
    let recs = records(&text);
    assert!(samples(&recs).len() >= 3);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn pid_mode_ends_when_the_process_is_gone() {
    let mut sh = Command::new("sh")
        .args(["-c", "sleep 0.7"])
        .spawn()
        .unwrap();
    let mut probe = bin()
        .args(["--pid", &sh.id().to_string(), "--interval", "0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(&mut sh, 10).success());
    let st = wait_for(&mut probe, 10);
    assert!(st.success());
    let (out, _) = read_all(&mut probe);
    let recs = records(&out);
    assert_eq!(recs[0]["pid"], sh.id());
    assert_eq!(samples(&recs).last().unwrap()["procs"], 0);
}

/// A v2 tree under `root` with SLURM job 42 (`controllers` enabled, the
/// named files of the fixture session's cgroup in the job's folder) and
/// the fixture process 26231 in its task: the job's folder.
fn v2_job_42(root: &Path, controllers: &str, files: &[&str]) -> PathBuf {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc-sys");
    let proc_dir = root.join("proc/26231");
    fs::create_dir_all(&proc_dir).unwrap();
    for f in ["stat", "status", "io"] {
        fs::copy(fx.join("proc/26231").join(f), proc_dir.join(f)).unwrap();
    }
    let job = root.join("sys/fs/cgroup/system.slice/slurmstepd.scope/job_42");
    let task = job.join("step_0/user/task_0");
    fs::create_dir_all(&task).unwrap();
    fs::write(root.join("sys/fs/cgroup/cgroup.controllers"), controllers).unwrap();
    let src = fx.join("cgroup-v2/sys/fs/cgroup/user.slice/user-1000.slice/session-520.scope");
    for f in files {
        fs::copy(src.join(f), job.join(f)).unwrap();
    }
    fs::write(task.join("cgroup.procs"), "26231\n").unwrap();
    job
}

#[test]
fn job_mode_on_a_fixture_cgroup_tree() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let job = v2_job_42(
        root,
        "cpu memory\n",
        &[
            "cpu.stat",
            "memory.current",
            "memory.peak",
            "memory.swap.current",
        ],
    );
    let o = bin()
        .args([
            "--job",
            "42",
            "--samples",
            "2",
            "--interval",
            "0.05",
            "--no-perf",
            "--proc-root",
        ])
        .arg(root.join("proc"))
        .arg("--sys-root")
        .arg(root.join("sys"))
        .env("SLURM_CPUS_ON_NODE", "4")
        .env("SLURM_MEM_PER_CPU", "1000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let meta = &recs[0];
    assert_eq!(meta["job_id"], "42");
    assert_eq!(meta["cgroup_version"], 2);
    assert_eq!(meta["req_cpus"], 4);
    assert_eq!(meta["req_mem_mb"], 4000.0);
    let s = samples(&recs);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["procs"], 1);
    assert_eq!(s[0]["job_id"], "42");
    assert!((num(s[0], "swap_mb") - 0.0).abs() < 1e9);
    // The cgroup goes away while the probe runs: it stops by itself.
    let mut probe = bin()
        .args([
            "--job",
            "42",
            "--interval",
            "0.05",
            "--no-perf",
            "--proc-root",
        ])
        .arg(root.join("proc"))
        .arg("--sys-root")
        .arg(root.join("sys"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    fs::remove_dir_all(&job).unwrap();
    let st = wait_for(&mut probe, 10);
    assert!(st.success());
    let (out, _) = read_all(&mut probe);
    let recs = records(&out);
    let s = samples(&recs);
    assert!(s.len() >= 2);
    assert_eq!(s.last().unwrap()["procs"], 0);
}

#[test]
fn job_probe_on_the_cgroup_path_ends_with_a_last_sample_when_a_file_disappears() {
    // Issue 22: the figures come from the job cgroup (the meta says so), and
    // a cgroup file that disappears (the job ending) ends the probe with 0.
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let job = v2_job_42(
        root,
        "cpu io memory pids\n",
        &["cpu.stat", "memory.stat", "memory.peak", "pids.current"],
    );
    fs::write(
        job.join("io.stat"),
        "8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
    )
    .unwrap();
    let mut probe = bin()
        .args([
            "--job",
            "42",
            "--interval",
            "0.05",
            "--no-perf",
            "--detail-every",
            "4",
        ])
        .arg("--proc-root")
        .arg(root.join("proc"))
        .arg("--sys-root")
        .arg(root.join("sys"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    fs::remove_file(job.join("memory.stat")).unwrap();
    let st = wait_for(&mut probe, 10);
    let (out, err) = read_all(&mut probe);
    assert!(st.success(), "{st:?} {err}");
    assert!(err.contains("memory.stat can no longer be read"), "{err}");
    let recs = records(&out);
    let meta = &recs[0];
    assert_eq!(meta["source"]["rss_mb"], "cgroup memory.stat", "{meta}");
    assert_eq!(meta["source"]["read_mb"], "cgroup io.stat");
    assert_eq!(meta["source"]["threads"], "cgroup pids.current");
    assert_eq!(meta["detail_every"], 4);
    let s = samples(&recs);
    assert!(s.len() >= 3, "{out}");
    assert!(s[0]["page_cache_mb"].as_f64().unwrap() > 0.0);
    assert_eq!(s[0]["threads"], 148);
    let last = s.last().unwrap();
    assert!(last.get("rss_mb").is_none(), "memory.stat is gone: {last}");
    assert_eq!(last["cpu_user_s"], s[0]["cpu_user_s"]);
    assert_eq!(s[0]["procs"], 1, "the first sample lists the processes");
    assert_eq!(out.lines().last().map(|l| l.ends_with('}')), Some(true));
}

#[test]
fn detail_every_0_is_a_usage_error() {
    let o = run(&["--job", "1", "--detail-every", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--detail-every must be at least 1"));
}

#[test]
fn hpc_monitor_starts_and_stops_a_probe_on_one_node() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let monitor = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bin-wrappers/hpc-monitor");
    let job = format!("77{}", std::process::id());
    let o = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" start --interval 0.2 --no-perf && sleep 1 && \"$0\" stop")
        .arg(&monitor)
        .env("SLURM_JOB_ID", &job)
        .env("SLURM_JOB_NUM_NODES", "1")
        .env("SLURMD_NODENAME", "node7")
        .env("HPC_SIZER_SPOOL", &spool)
        .env("HPC_PROBE", env!("CARGO_BIN_EXE_hpc-probe"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let file = spool.join(&job).join("node7.ndjson");
    let recs = records(&fs::read_to_string(&file).unwrap());
    assert_eq!(recs[0]["kind"], "meta");
    assert_eq!(recs[0]["job_id"], job.as_str());
    // The node is SLURM's name for it, as sacct's NodeList says, not the
    // host name (they differ on a host with several slurmd).
    assert_eq!(recs[0]["host"], "node7");
    let s = samples(&recs);
    assert!(s.len() >= 3, "{} samples", s.len());
    assert!(
        s.iter().any(|v| v["procs"].as_u64().unwrap_or(0) >= 1),
        "the job's shell was watched"
    );
    assert!(!spool.join(&job).join(".monitor.node7.pids").exists());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(spool.join(&job)).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

// ---- Faults: symlinked and shared outputs, children, nothing to watch ----

/// Whether a process is gone: no /proc entry, or a zombie nobody reaps.
fn process_gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
    }
}

/// Waits up to `secs` for a process to be gone.
fn gone_within(pid: u32, secs: f64) -> bool {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        if process_gone(pid) {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for a file's first line (a probe's meta record) and returns it.
fn meta_of(path: &Path, secs: u64) -> Value {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(t) = fs::read_to_string(path) {
            if let Some(l) = t.lines().next() {
                return serde_json::from_str(l).unwrap();
            }
        }
        assert!(Instant::now() < end, "no meta in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

fn me() -> String {
    std::process::id().to_string()
}

#[test]
fn out_never_follows_a_symlink() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious.txt");
    fs::write(&target, "precious\n").unwrap();
    let link = dir.path().join("link.ndjson");
    symlink(&target, &link).unwrap();
    let o = bin()
        .args(["--pid", &me(), "--samples", "1", "--no-perf", "--out"])
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symbolic link"),
        "{}",
        show(&o)
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious\n");
    // A dangling link does not create its target.
    let missing = dir.path().join("created-through-link");
    let dangling = dir.path().join("dangling.ndjson");
    symlink(&missing, &dangling).unwrap();
    let o = bin()
        .args(["--pid", &me(), "--samples", "1", "--no-perf", "--out"])
        .arg(&dangling)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(!missing.exists(), "a dangling link created its target");
    // A name with a newline and an escape code is printed escaped, on one line.
    let evil = dir.path().join("evil\nname\x1b[31m.ndjson");
    symlink(&target, &evil).unwrap();
    let o = bin()
        .args(["--pid", &me(), "--samples", "1", "--no-perf", "--out"])
        .arg(&evil)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.contains("evil\\nname\\u{1b}[31m"), "{err:?}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious\n");
    // A regular file is still written (and emptied first).
    let plain = dir.path().join("plain.ndjson");
    fs::write(&plain, "old junk\n").unwrap();
    let o = bin()
        .args(["--pid", &me(), "--samples", "1", "--no-perf", "--out"])
        .arg(&plain)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&fs::read_to_string(&plain).unwrap());
    assert_eq!(recs[0]["kind"], "meta");
    assert_eq!(samples(&recs).len(), 1);
}

#[test]
fn a_second_probe_on_the_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("node.ndjson");
    let mut first = bin()
        .args(["--pid", &me(), "--interval", "0.05", "--no-perf", "--out"])
        .arg(&out)
        .spawn()
        .unwrap();
    let meta = meta_of(&out, 10);
    assert_eq!(meta["probe_pid"], first.id());
    let o = bin()
        .args(["--pid", &me(), "--samples", "2", "--no-perf", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("another hpc-probe"),
        "{}",
        show(&o)
    );
    std::thread::sleep(Duration::from_millis(200));
    sigterm(first.id());
    assert!(wait_for(&mut first, 10).success());
    // The first probe's file is whole: one meta, its own samples only.
    let recs = records(&fs::read_to_string(&out).unwrap());
    assert_eq!(recs.iter().filter(|r| r["kind"] == "meta").count(), 1);
    assert!(samples(&recs).len() >= 3);
}

/// Starts `hpc-probe [args] -- CMD` writing to `out`, with stdin not a
/// terminal, and returns it with the command's pid from the meta record.
fn probe_command(out: &Path, cmd: &[&str]) -> (Child, u32) {
    let probe = bin()
        .args(["--interval", "0.05", "--no-perf", "--out"])
        .arg(out)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = meta_of(out, 10)["pid"].as_u64().unwrap() as u32;
    (probe, pid)
}

#[test]
fn the_command_dies_when_the_probe_is_killed_9() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, pid) = probe_command(&dir.path().join("p.ndjson"), &["sleep", "60"]);
    assert!(!process_gone(pid));
    probe.kill().unwrap();
    probe.wait().unwrap();
    assert!(
        gone_within(pid, 3.0),
        "the command outlived a kill -9 probe"
    );
}

#[test]
fn sigterm_stops_the_command_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, sh) = probe_command(
        &dir.path().join("p.ndjson"),
        &["sh", "-c", "sleep 60 & sleep 60 & wait"],
    );
    let children = format!("/proc/{sh}/task/{sh}/children");
    let end = Instant::now() + Duration::from_secs(10);
    let kids: Vec<u32> = loop {
        let k: Vec<u32> = fs::read_to_string(&children)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if k.len() == 2 {
            break k;
        }
        assert!(Instant::now() < end, "no children of {sh}");
        std::thread::sleep(Duration::from_millis(20));
    };
    sigterm(probe.id());
    let st = wait_for(&mut probe, 10);
    assert_eq!(st.code(), Some(0));
    for k in kids {
        assert!(gone_within(k, 3.0), "grandchild {k} outlived the probe");
    }
    assert!(gone_within(sh, 1.0));
}

#[test]
fn the_command_dies_when_the_reader_goes_away() {
    // `hpc-probe -- sleep 60 | head -1`: the probe ends on EPIPE.
    let mut probe = bin()
        .args(["--interval", "0.05", "--no-perf", "--", "sleep", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line(&mut probe);
    let meta: Value = serde_json::from_str(&line).unwrap();
    let pid = meta["pid"].as_u64().unwrap() as u32;
    let st = wait_for(&mut probe, 10);
    assert_eq!(st.code(), Some(0), "a closed pipe is not an error");
    assert!(gone_within(pid, 3.0), "the command outlived the probe");
}

#[test]
fn the_command_dies_when_the_output_fails() {
    // The meta record cannot be written to a full disk: the probe fails
    // at once and takes its command (and the command's children) with it.
    let marker = format!("hpc-probe-test-marker-{}", std::process::id());
    // (No pipes: the command would hold them open.)
    let st = bin()
        .args([
            "--no-perf",
            "--out",
            "/dev/full",
            "--",
            "sh",
            "-c",
            "sleep 60; :",
        ])
        .arg(&marker)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(1));
    std::thread::sleep(Duration::from_millis(500));
    let alive: Vec<String> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = fs::read(e.path().join("cmdline")).ok()?;
            (String::from_utf8_lossy(&cmd).contains(&marker) && !process_gone(pid))
                .then(|| pid.to_string())
        })
        .collect();
    assert!(alive.is_empty(), "left running: {alive:?}");
}

#[test]
fn a_job_with_no_process_is_nothing_to_watch() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir_all(empty.join("proc")).unwrap();
    fs::create_dir_all(empty.join("sys")).unwrap();
    let out = dir.path().join("out/node.ndjson");
    let t = Instant::now();
    let mut probe = bin()
        .args([
            "--job",
            "4242",
            "--interval",
            "0.3",
            "--no-perf",
            "--proc-root",
        ])
        .arg(empty.join("proc"))
        .arg("--sys-root")
        .arg(empty.join("sys"))
        .arg("--out")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_for(&mut probe, 10);
    let (_, err) = read_all(&mut probe);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("nothing to watch"), "{err}");
    assert!(t.elapsed() < Duration::from_secs_f64(0.3 + 1.5));
    assert!(!out.exists(), "no file, no sample");
    // The real /proc: no process carries this job id.
    let o = run(&["--job", "987654321", "--interval", "0.2", "--no-perf"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(o.stdout.is_empty(), "{}", show(&o));
}

#[test]
fn a_missing_pid_writes_nothing() {
    let o = run(&["--pid", "2147483646", "--samples", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(o.stdout.is_empty(), "{}", show(&o));
}

#[test]
fn a_job_whose_processes_are_gone_ends_with_0() {
    // No cgroup: the job is matched through environ, and ends when its
    // last process is gone (without --until-gone).
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    let p = proc_root.join("300");
    fs::create_dir_all(&p).unwrap();
    fs::write(
        p.join("stat"),
        "300 (worker) S 1 300 300 0 -1 0 0 0 0 0 50 0 0 0 20 0 1 0 5 1000 25 0 0 0\n",
    )
    .unwrap();
    fs::write(p.join("environ"), "SLURM_JOB_ID=5\0").unwrap();
    fs::create_dir_all(d.path().join("sys")).unwrap();
    let mut probe = bin()
        .args([
            "--job",
            "5",
            "--interval",
            "0.05",
            "--no-perf",
            "--proc-root",
        ])
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(d.path().join("sys"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out_thread = {
        let mut so = probe.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            so.read_to_string(&mut s).unwrap();
            s
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    fs::remove_dir_all(&p).unwrap();
    let st = wait_for(&mut probe, 10);
    assert_eq!(st.code(), Some(0));
    let recs = records(&out_thread.join().unwrap());
    let s = samples(&recs);
    assert!(s.len() >= 2);
    assert_eq!(s[0]["procs"], 1);
    assert_eq!(s.last().unwrap()["procs"], 0);
}

#[test]
fn a_full_stderr_never_panics() {
    for (args, code) in [
        (vec!["--pid", "2147483646"], 1),
        (vec!["--bogus"], 2),
        (vec!["--", "/nonexistent/cmd"], 127),
        (vec!["--job", "987654321", "--interval", "0.05"], 1),
    ] {
        let st = status_to(bin().args(&args), Stdio::null(), "/dev/null", "/dev/full");
        assert_eq!(st, Some(code), "{args:?}");
    }
}

/// Runs `hpc-monitor ARGS` for `job` with a spool under `spool`. Its
/// stderr goes through a file: the probe it leaves running in the
/// background would hold a pipe open.
fn monitor(spool: &Path, job: &str, args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bin-wrappers/hpc-monitor");
    let mut err = tempfile::tempfile().unwrap();
    let status = Command::new("sh")
        .arg(&script)
        .args(args)
        .env("SLURM_JOB_ID", job)
        .env("SLURM_JOB_NUM_NODES", "1")
        .env("SLURMD_NODENAME", "node7")
        .env("HPC_SIZER_SPOOL", spool)
        .env("HPC_PROBE", env!("CARGO_BIN_EXE_hpc-probe"))
        .env("HPC_MONITOR_WAIT", "5")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err.try_clone().unwrap())
        .status()
        .unwrap();
    let mut stderr = Vec::new();
    use std::io::Seek;
    err.rewind().unwrap();
    err.read_to_end(&mut stderr).unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr,
    }
}

#[test]
fn hpc_monitor_refuses_a_second_start_and_reports_a_failed_probe() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let job = format!("78{}", std::process::id());
    // A process of the job that outlives the monitor's own shell.
    let mut work = Command::new("sleep")
        .arg("60")
        .env("SLURM_JOB_ID", &job)
        .spawn()
        .unwrap();
    let o = monitor(&spool, &job, &["start", "--interval", "0.1", "--no-perf"]);
    assert!(o.status.success(), "{}", show(&o));
    let file = spool.join(&job).join("node7.ndjson");
    let pids = spool.join(&job).join(".monitor.node7.pids");
    // "PID START": the probe's pid and its start time (/proc/PID/stat).
    let line = fs::read_to_string(&pids).unwrap();
    let (pid, start) = line.trim().split_once(' ').unwrap();
    assert_eq!(meta_of(&file, 1)["probe_pid"].to_string(), pid);
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    assert_eq!(after_comm.split(' ').nth(19), Some(start), "{stat}");
    let o = monitor(&spool, &job, &["start", "--interval", "0.1", "--no-perf"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already running"),
        "{}",
        show(&o)
    );
    std::thread::sleep(Duration::from_millis(300));
    let o = monitor(&spool, &job, &["stop"]);
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&fs::read_to_string(&file).unwrap());
    assert_eq!(recs.iter().filter(|r| r["kind"] == "meta").count(), 1);
    assert!(samples(&recs).len() >= 3);
    assert!(!pids.exists());

    // A probe that fails at once (a bad flag) fails the start.
    let o = monitor(&spool, &job, &["start", "--bogus"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(!pids.exists());
    // So does one refused by the lock of a probe started by hand.
    let mut by_hand = bin()
        .args(["--job", &job, "--interval", "0.1", "--no-perf", "--out"])
        .arg(&file)
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while meta_of(&file, 10)["probe_pid"] != by_hand.id() {
        assert!(Instant::now() < end, "the probe by hand did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = monitor(&spool, &job, &["start", "--interval", "0.1", "--no-perf"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("another hpc-probe"),
        "{}",
        show(&o)
    );
    sigterm(by_hand.id());
    assert!(wait_for(&mut by_hand, 10).success());
    work.kill().unwrap();
    work.wait().unwrap();
}

#[test]
fn cpus_given_on_the_command_line_reach_the_meta() {
    // --cpus 2 set cpu_frac in the samples but not req_cpus in the meta,
    // which hpc-merge reads: it dropped cpu_frac, and hpc-flags left
    // idle_cpu unevaluated.
    let o = run(&["--cpus", "2", "--interval", "0.1", "--", "sleep", "0.3"]);
    assert!(o.status.success(), "{}", show(&o));
    let recs = records(&String::from_utf8(o.stdout).unwrap());
    let meta = recs.iter().find(|r| r["kind"] == "meta").unwrap();
    assert_eq!(meta["req_cpus"], 2, "{meta}");
}
