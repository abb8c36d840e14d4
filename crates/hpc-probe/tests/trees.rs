//! Fixture-tree tests: the real /proc and /sys files from
//! `tests/fixtures/proc-sys`, copied into temporary trees, with second
//! readings written by the tests and SLURM-shaped cgroup trees built from
//! the real cgroup files.

use std::fs;
use std::path::{Path, PathBuf};

use hpc_probe::cgroup::{self, JobCgroup, Version};
use hpc_probe::node::NodeSources;
use hpc_probe::sampler::{Config, Reaped, Sampler, Watch};

const MB: f64 = 1024.0 * 1024.0;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc-sys")
}

fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            fs::write(&to, fs::read(e.path()).unwrap()).unwrap();
        }
    }
}

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn config(proc_root: &Path, watch: Watch) -> Config {
    Config {
        proc_root: proc_root.to_path_buf(),
        watch,
        pss: false,
        perf: false,
        cpus: Some(2),
        clk_tck: 100.0,
        page_size: 4096,
        self_pid: u32::MAX,
        host: Some("node1".into()),
        detail_every: 1,
        job_id: Some("42".into()),
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn local_capture_gives_real_rates_between_t0_and_t1() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_tree(&fixtures().join("local/t0"), root);
    let proc_root = root.join("proc");
    let sys_root = root.join("sys");
    let node = NodeSources::discover(&proc_root, &sys_root);
    assert_eq!(node.numa.len(), 1);
    let mut s = Sampler::new(config(&proc_root, Watch::Pid(17447)), node);
    let a = s.sample(1795307673.47, 0.0, None);
    assert_eq!(a.procs, Some(1));
    assert_eq!(a.cpu_cores, None, "no rate on the first sample");
    assert!(close(a.cpu_user_s.unwrap(), (137.0 + 4.0) / 100.0, 1e-9));
    // The second reading, 5.037 s later.
    copy_tree(&fixtures().join("local/t1"), root);
    let dt = 5.036_955_264; // t1/timestamp - t0/timestamp
    let b = s.sample(1795307678.5, dt, None);
    let cores = b.cpu_cores.unwrap();
    assert!(
        cores > 0.9 && cores < 1.1,
        "python loop uses about a core: {cores}"
    );
    assert!(close(b.cpu_frac.unwrap(), cores / 2.0, 0.001));
    let w = b.write_mbps.unwrap();
    let want = (234893312.0 - 52441088.0) / MB / dt;
    assert!(close(w, want, 0.01), "{w} vs {want}");
    assert!(close(b.write_mb.unwrap(), 234893312.0 / MB, 0.001));
    assert_eq!(b.numa_miss_rate, Some(0.0));
    assert!(b.hwm_mb.unwrap() >= b.rss_mb.unwrap());
    assert_eq!(b.threads, Some(1));

    // The idle sleep process: a zero-rate case.
    let mut idle = Sampler::new(
        config(&proc_root, Watch::Pid(17380)),
        NodeSources::default(),
    );
    let _ = idle.sample(0.0, 0.0, None);
    let z = idle.sample(1.0, 1.0, None);
    assert_eq!(z.cpu_cores, Some(0.0));
    assert_eq!(z.write_mbps, Some(0.0));
}

#[test]
fn node_counters_with_second_readings_and_wrap_around() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_tree(&fixtures().join("proc"), &root.join("proc"));
    copy_tree(&fixtures().join("sys"), &root.join("sys"));
    let proc_root = root.join("proc");
    let sys_root = root.join("sys");
    let node = NodeSources::discover(&proc_root, &sys_root);
    assert_eq!(node.numa.len(), 3, "node0..node2");
    assert_eq!(node.lustre.len(), 1);
    assert_eq!(node.rapl.len(), 1, "package only, not the core subdomain");
    assert_eq!(node.rapl[0].1, Some(262143328850));
    assert_eq!(node.ib.len(), 3, "mlx4_0 ports 1, 2 and mlx5_0 port 1");
    let mut buf = Vec::new();
    let a = node.read(&mut buf);

    let llite = proc_root.join("fs/lustre/llite/lustrefs-ffff88105db50000/stats");
    write(
        &llite,
        "snapshot_time             1510950469.772792457 secs.nsecs\n\
         start_time                1510000000.0 secs.nsecs\n\
         read_bytes                3 samples [bytes] 4096 4194304 14680064 99999\n\
         write_bytes               89467900 samples [bytes] 4096 1048576 93813807779840\n\
         open                      146 samples [reqs]\n\
         close                     106 samples [regs]\n\
         readdir                   12 samples [regs]\n\
         truncate                  134 samples [regs]\n\
         getattr                   41 samples [usecs] 1 2 3 4\n\
         getxattr                  85 samples [regs]\n\
         removexattr               134 samples [regs]\n\
         inode_permission          9398 samples [regs]\n",
    );
    // RAPL wraps: the second reading is below the first.
    let max = 262143328850u64;
    let first = 240422366267u64;
    write(
        &sys_root.join("class/powercap/intel-rapl:0/energy_uj"),
        "1000000\n",
    );
    // The subdomain moves too, but must not be counted.
    write(
        &sys_root.join("class/powercap/intel-rapl:0:0/energy_uj"),
        "999999999\n",
    );
    // numastat: node0 gains 900 hits and 100 misses.
    let ns = sys_root.join("devices/system/node/node0/numastat");
    let text = fs::read_to_string(&ns)
        .unwrap()
        .replace("numa_hit 193460335812", "numa_hit 193460336712")
        .replace("numa_miss 12624528", "numa_miss 12624628");
    write(&ns, &text);
    // IB: the 64-bit counter of mlx4_0 port 1 moves by 262144 words (1 MiB).
    let ext = sys_root.join("class/infiniband/mlx4_0/ports/1/counters_ext/port_rcv_data_64");
    let old: u64 = fs::read_to_string(&ext).unwrap().trim().parse().unwrap();
    write(&ext, &format!("{}\n", old + 262144));
    let b = node.read(&mut buf);
    let r = node.rates(&a, &b, 2.0);
    assert!(close(
        r.lustre_read_mbps.unwrap(),
        (14680064.0 - 4194304.0) / MB / 2.0,
        1e-9
    ));
    assert!(close(
        r.lustre_write_mbps.unwrap(),
        10485760.0 / MB / 2.0,
        1e-9
    ));
    assert!(close(r.lustre_meta_ops.unwrap(), 20.0 / 2.0, 1e-9));
    let joules = (max - first + 1000000) as f64 / 1e6;
    assert!(close(r.energy_j.unwrap(), joules, 1e-6), "{:?}", r.energy_j);
    assert!(close(r.power_w.unwrap(), joules / 2.0, 1e-6));
    assert!(close(r.numa_miss_rate.unwrap(), 0.1, 1e-12));
    assert!(close(r.ib_rx_mbps.unwrap(), 0.5, 1e-12));
    assert_eq!(r.ib_tx_mbps, Some(0.0));

    // An IB counter reset (HCA reset) counts from zero, not negative.
    write(&ext, "262144\n");
    let c = node.read(&mut buf);
    let r = node.rates(&b, &c, 1.0);
    assert!(close(r.ib_rx_mbps.unwrap(), 1.0, 1e-12));
    // A source whose file disappears gives no field, not zeros.
    fs::remove_file(&llite).unwrap();
    let e = node.read(&mut buf);
    assert_eq!(node.rates(&c, &e, 1.0).lustre_read_mbps, None);
}

#[test]
fn sampler_accumulates_energy_since_start() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_tree(&fixtures().join("proc"), &root.join("proc"));
    copy_tree(
        &fixtures().join("sys/class/powercap"),
        &root.join("sys/class/powercap"),
    );
    let node = NodeSources::discover(&root.join("proc"), &root.join("sys"));
    let mut s = Sampler::new(config(&root.join("proc"), Watch::Pid(26231)), node);
    let a = s.sample(0.0, 0.0, None);
    assert_eq!(a.energy_j, Some(0.0));
    assert_eq!(a.power_w, None);
    let e = root.join("sys/class/powercap/intel-rapl:0/energy_uj");
    write(&e, "240432366267\n");
    let b = s.sample(1.0, 1.0, None);
    assert_eq!(b.energy_j, Some(10.0));
    assert_eq!(b.power_w, Some(10.0));
    write(&e, "5000000\n");
    let c = s.sample(2.0, 3.0, None);
    let wrapped = (262143328850.0 - 240432366267.0 + 5000000.0) / 1e6;
    assert!(close(c.energy_j.unwrap(), 10.0 + wrapped, 0.001));
    // The procfs fixture process: stat, status and io from the real files.
    assert_eq!(a.procs, Some(1));
    assert!(close(a.cpu_user_s.unwrap(), (1677.0 + 158.0) / 100.0, 1e-9));
    assert!(close(a.cpu_sys_s.unwrap(), (44.0 + 99.0) / 100.0, 1e-9));
    assert!(close(a.hwm_mb.unwrap(), 8028.0 / 1024.0, 0.001));
    assert!(close(a.read_mb.unwrap(), 1024.0 / MB, 0.001));
}

/// Builds a SLURM cgroup v1 tree (separate or co-mounted cpuacct) around the
/// procfs fixture process 26231, from the real Docker/Kubernetes files.
fn slurm_v1_tree(root: &Path, comounted: bool) -> (PathBuf, PathBuf) {
    let proc_root = root.join("proc");
    let sys_root = root.join("sys");
    copy_tree(&fixtures().join("proc/26231"), &proc_root.join("26231"));
    let (src, cpu_name, mem_src, cpu_src) = if comounted {
        let base = fixtures().join("cgroup-v1-comounted/sys/fs/cgroup");
        let tail = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7a96c459_d529_44ae_9f99_90d3798d6426.slice/cri-containerd-1d3d308a7d48a27814a68bf33a44acf4441c9c02463ca0bc1cdfdc8c0b4a8496.scope";
        (
            base.clone(),
            "cpu,cpuacct",
            base.join("memory").join(tail),
            base.join("cpu,cpuacct").join(tail),
        )
    } else {
        let base = fixtures().join("cgroup-v1/sys/fs/cgroup");
        let id = "docker/b29faf21b7eff959f64b4192c34d5d67a707fe8561e9eaa608cb27693fba4242";
        (
            base.clone(),
            "cpuacct",
            base.join("memory").join(id),
            base.join("cpuacct").join(id),
        )
    };
    let _ = src;
    let job = "slurm/uid_0/job_42";
    let mem = sys_root.join("fs/cgroup/memory").join(job);
    let cpu = sys_root.join("fs/cgroup").join(cpu_name).join(job);
    copy_tree(&mem_src, &mem);
    copy_tree(&cpu_src, &cpu);
    write(&mem.join("step_0/task_0/cgroup.procs"), "26231\n4000000\n");
    write(&cpu.join("step_0/task_0/cgroup.procs"), "26231\n");
    write(
        &proc_root.join("26231/cgroup"),
        &format!("5:memory:/{job}/step_0/task_0\n3:{cpu_name}:/{job}/step_0/task_0\n0::/\n"),
    );
    (proc_root, sys_root)
}

#[test]
fn slurm_cgroup_v1_tree_from_real_files() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = slurm_v1_tree(d.path(), false);
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    assert_eq!(cg.version, Version::V1);
    assert!(cg.cpuacct.is_some());
    let text = fs::read_to_string(proc_root.join("26231/cgroup")).unwrap();
    assert_eq!(
        cgroup::job_cgroup_from_lines(&sys_root, &text, "42").unwrap(),
        cg
    );
    let mut s = Sampler::new(
        config(
            &proc_root,
            Watch::Job {
                id: "42".into(),
                cgroup: Some(cg.clone()),
            },
        ),
        NodeSources::default(),
    );
    let c = s.cgroup_counters().unwrap();
    assert!(close(c.cpu_s.unwrap(), 95.996653175, 1e-9));
    // pid 4000000 is listed but has no /proc entry (it exited in between):
    // it is skipped without a word.
    let a = s.sample(0.0, 0.0, Some(c));
    assert_eq!(a.procs, Some(1));
    assert!(
        close(a.cpu_user_s.unwrap(), 61.95, 1e-9),
        "cpuacct.stat user 6195 ticks"
    );
    assert!(close(a.cpu_sys_s.unwrap(), 7.73, 1e-9));
    assert!(
        close(a.hwm_mb.unwrap(), 298532864.0 / MB, 0.001),
        "max_usage_in_bytes"
    );
    // Second reading: 2 s more CPU in 1 s (two busy cores).
    let usage = cg.cpuacct.as_ref().unwrap().join("cpuacct.usage");
    write(&usage, "97996653175\n");
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 1.0, c);
    assert!(close(b.cpu_cores.unwrap(), 2.0, 1e-9));
    assert!(close(b.cpu_frac.unwrap(), 1.0, 1e-9));
    // The job ends: its cgroup goes away.
    fs::remove_dir_all(&cg.dir).unwrap();
    let c = s.cgroup_counters();
    assert!(c.is_none());
    let _ = s.sample(2.0, 2.0, c);
    assert!(s.cgroup_gone());
    assert_eq!(s.process_count(), 0);
}

#[test]
fn slurm_cgroup_v1_comounted_cpu_cpuacct() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = slurm_v1_tree(d.path(), true);
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    assert!(cg
        .cpuacct
        .as_ref()
        .unwrap()
        .to_str()
        .unwrap()
        .contains("cpu,cpuacct"));
    let text = fs::read_to_string(proc_root.join("26231/cgroup")).unwrap();
    assert_eq!(
        cgroup::job_cgroup_from_lines(&sys_root, &text, "42").unwrap(),
        cg
    );
    let mut s = Sampler::new(
        config(
            &proc_root,
            Watch::Job {
                id: "42".into(),
                cgroup: Some(cg),
            },
        ),
        NodeSources::default(),
    );
    let c = s.cgroup_counters().unwrap();
    assert!(close(c.cpu_s.unwrap(), 124659.500367, 1e-6));
    assert_eq!(c.peak_bytes, Some(1532657664));
}

#[test]
fn slurm_cgroup_v2_tree_from_real_files() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let proc_root = root.join("proc");
    let sys_root = root.join("sys");
    copy_tree(&fixtures().join("proc/26231"), &proc_root.join("26231"));
    let src =
        fixtures().join("cgroup-v2/sys/fs/cgroup/user.slice/user-1000.slice/session-520.scope");
    let job = sys_root.join("fs/cgroup/system.slice/slurmstepd.scope/job_42");
    copy_tree(&src, &job);
    write(
        &sys_root.join("fs/cgroup/cgroup.controllers"),
        "cpu memory pids\n",
    );
    write(&job.join("step_0/user/task_0/cgroup.procs"), "26231\n");
    write(&job.join("step_0/slurm/cgroup.procs"), "1\n");
    write(
        &proc_root.join("26231/cgroup"),
        "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n",
    );
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    assert_eq!(cg.version, Version::V2);
    let mut s = Sampler::new(
        config(
            &proc_root,
            Watch::Job {
                id: "42".into(),
                cgroup: Some(cg),
            },
        ),
        NodeSources::default(),
    );
    let c = s.cgroup_counters();
    let a = s.sample(0.0, 0.0, c);
    assert_eq!(
        a.procs,
        Some(1),
        "slurmstepd (step_0/slurm) is not a job process"
    );
    assert!(
        close(a.hwm_mb.unwrap(), 18772946944.0 / MB, 0.001),
        "memory.peak"
    );
    assert!(a.cpu_user_s.unwrap() > 0.0);
    let cpu = job.join("cpu.stat");
    let text = fs::read_to_string(&cpu).unwrap();
    let usage: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    write(
        &cpu,
        &text.replace(
            &format!("usage_usec {usage}"),
            &format!("usage_usec {}", usage + 500_000),
        ),
    );
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 2.0, c);
    assert!(close(b.cpu_cores.unwrap(), 0.25, 1e-9));

    // The namespace-relative path of the real v2 fixture is resolved by its
    // tail, never joined as `mount/../..`.
    let real = fixtures().join("cgroup-v2/sys/fs/cgroup");
    let text = fs::read_to_string(fixtures().join("cgroup-v2/proc/2233801/cgroup")).unwrap();
    let line = &cgroup::parse_proc_cgroup(&text)[0];
    assert_eq!(line.path, "/../../user-1000.slice/session-520.scope");
    assert_eq!(cgroup::normalize(line.path), None);
    let dir = cgroup::resolve(&real, line.path).unwrap();
    assert!(dir.starts_with(&real));
    assert!(dir.ends_with("user.slice/user-1000.slice/session-520.scope"));
}

fn fake_stat(pid: u32, ppid: u32, utime: u64, start: u64) -> String {
    format!("{pid} (worker) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 {utime} 0 0 0 20 0 1 0 {start} 1000 25 0 0 0\n")
}

#[test]
fn pid_reuse_is_a_new_process_and_cpu_never_goes_back() {
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    let sys_root = d.path().join("sys");
    let job = sys_root.join("fs/cgroup/system.slice/slurmstepd.scope/job_7");
    write(&sys_root.join("fs/cgroup/cgroup.controllers"), "");
    write(&job.join("step_0/user/task_0/cgroup.procs"), "100\n");
    write(&proc_root.join("100/stat"), &fake_stat(100, 1, 50, 5));
    let cg = JobCgroup::v2(job.clone());
    let mut s = Sampler::new(
        config(
            &proc_root,
            Watch::Job {
                id: "7".into(),
                cgroup: Some(cg),
            },
        ),
        NodeSources::default(),
    );
    let a = s.sample(0.0, 0.0, None);
    assert_eq!(a.cpu_user_s, Some(0.5));
    // Same pid, new start time: another process. The old one's 0.5 s stay.
    write(&proc_root.join("100/stat"), &fake_stat(100, 1, 1, 9));
    let b = s.sample(1.0, 1.0, None);
    assert_eq!(b.procs, Some(1));
    assert_eq!(b.cpu_user_s, Some(0.51));
    assert!(close(b.cpu_cores.unwrap(), 0.01, 1e-9));

    // Pid mode: the watched root replaced by a stranger with its pid is gone.
    let mut p = Sampler::new(config(&proc_root, Watch::Pid(100)), NodeSources::default());
    let _ = p.sample(0.0, 0.0, None);
    write(&proc_root.join("100/stat"), &fake_stat(100, 1, 3, 77));
    let c = p.sample(1.0, 1.0, None);
    assert_eq!(c.procs, Some(0));
    assert_eq!(
        c.cpu_user_s,
        Some(0.01),
        "last seen CPU of the dead root is kept"
    );
}

#[test]
fn memory_never_read_is_left_out_not_zero() {
    // A watched process gone before the first reading: its sample said
    // rss_mb 0 and hwm_mb 0, a peak of 0 MB to hpc-flags.
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    fs::create_dir_all(&proc_root).unwrap();
    let mut s = Sampler::new(config(&proc_root, Watch::Pid(100)), NodeSources::default());
    let a = s.sample(0.0, 0.0, None);
    assert_eq!(a.procs, Some(0));
    assert_eq!((a.rss_mb, a.hwm_mb, a.swap_mb), (None, None, None), "{a:?}");
}

#[test]
fn a_reaped_commands_children_are_not_counted_twice() {
    // The command (100) and its child (101), both gone at the last sample:
    // the command's CPU comes from getrusage(RUSAGE_CHILDREN), which holds
    // the child's too, and the child's last seen CPU was added again
    // (a probe of four parallel children said 3.9 s for 3.2 s used).
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    write(&proc_root.join("100/stat"), &fake_stat(100, 1, 10, 5));
    write(&proc_root.join("100/task/100/children"), "101\n");
    write(&proc_root.join("101/stat"), &fake_stat(101, 100, 40, 6));
    let mut s = Sampler::new(config(&proc_root, Watch::Pid(100)), NodeSources::default());
    let a = s.sample(0.0, 0.0, None);
    assert_eq!(a.procs, Some(2));
    assert_eq!(a.cpu_user_s, Some(0.5));
    // Both exit; the probe reaps the command: 1.2 s in all (the child ran
    // 0.3 s more after the last sample).
    fs::remove_dir_all(proc_root.join("100")).unwrap();
    fs::remove_dir_all(proc_root.join("101")).unwrap();
    s.root_reaped(Reaped {
        user_s: 1.2,
        ..Reaped::default()
    });
    let b = s.sample(1.0, 1.0, None);
    assert_eq!(b.procs, Some(0));
    assert!(close(b.cpu_user_s.unwrap(), 1.2, 1e-9), "{b:?}");
}

#[test]
fn the_sample_at_the_reaping_keeps_its_peak_and_reads_no_burst_of_cores() {
    // A command that used 300 MiB between two readings and exits: its peak
    // was lost (getrusage's ru_maxrss was not read). Its last interval, a
    // few ms after the sample before, took the CPU the reaping handed over
    // as a rate: 15 busy cores on 2 CPUs.
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    write(&proc_root.join("100/stat"), &fake_stat(100, 1, 10, 5));
    let mut s = Sampler::new(config(&proc_root, Watch::Pid(100)), NodeSources::default());
    let _ = s.sample(0.0, 0.0, None);
    write(&proc_root.join("100/stat"), &fake_stat(100, 1, 60, 5));
    let b = s.sample(1.0, 1.0, None);
    assert!(close(b.cpu_cores.unwrap(), 0.5, 1e-9), "{b:?}");
    fs::remove_dir_all(proc_root.join("100")).unwrap();
    s.root_reaped(Reaped {
        user_s: 0.9,
        max_rss_kb: 300 * 1024,
        ..Reaped::default()
    });
    let c = s.sample(1.002, 1.002, None);
    assert!(
        close(c.cpu_user_s.unwrap(), 0.9, 1e-9),
        "the CPU seconds are kept: {c:?}"
    );
    assert_eq!(c.cpu_cores, None, "0.3 s over 2 ms is no reading: {c:?}");
    assert!(c.hwm_mb.unwrap() >= 300.0, "{c:?}");
}

#[test]
fn environ_fallback_finds_job_processes_without_cgroup() {
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    write(&proc_root.join("200/stat"), &fake_stat(200, 1, 10, 5));
    write(&proc_root.join("200/environ"), "A=1\0SLURM_JOB_ID=9\0");
    write(&proc_root.join("201/stat"), &fake_stat(201, 1, 20, 6));
    write(&proc_root.join("201/environ"), "SLURM_JOB_ID=99\0");
    write(&proc_root.join("202/stat"), &fake_stat(202, 200, 30, 7));
    write(&proc_root.join("self/stat"), "not a pid folder");
    let mut s = Sampler::new(
        config(
            &proc_root,
            Watch::Job {
                id: "9".into(),
                cgroup: None,
            },
        ),
        NodeSources::default(),
    );
    let a = s.sample(0.0, 0.0, None);
    assert_eq!(a.procs, Some(1), "only pid 200 carries SLURM_JOB_ID=9");
    assert_eq!(a.cpu_user_s, Some(0.1));
}

/// A `/proc/PID/stat` line with every counter the sampler sums set.
fn big_stat(pid: u32, ticks: u64, child_ticks: i64, threads: i64, rss: i64) -> String {
    format!(
        "{pid} (big one) R 1 {pid} {pid} 0 -1 0 0 0 0 0 {ticks} {ticks} {child_ticks} {child_ticks} 20 0 {threads} 0 {pid} 1000 {rss} 0 0\n"
    )
}

#[test]
fn counters_near_u64_max_saturate_and_never_panic() {
    // Real-shaped files with values no kernel gives but a broken one or a
    // crafted tree can: every sum the sampler makes would overflow (and a
    // debug build panic) without saturation.
    let d = tempfile::tempdir().unwrap();
    let proc_root = d.path().join("proc");
    let status = fs::read_to_string(fixtures().join("proc/26231/status"))
        .unwrap()
        .replace("VmHWM:\t    8028 kB", "VmHWM:\t18446744073709551615 kB")
        .replace("VmSwap:\t       0 kB", "VmSwap:\t18446744073709551615 kB");
    assert!(status.contains("VmHWM:\t18446744073709551615 kB"));
    let io = "rchar: 1\nwchar: 1\nsyscr: 1\nsyscw: 1\n\
              read_bytes: 18446744073709551615\nwrite_bytes: 18446744073709551615\n\
              cancelled_write_bytes: 0\n";
    for pid in [500u32, 501] {
        let p = proc_root.join(pid.to_string());
        write(
            &p.join("stat"),
            &big_stat(pid, u64::MAX - 10, i64::MAX, i64::from(i32::MAX), i64::MAX),
        );
        write(&p.join("status"), &status);
        write(&p.join("io"), io);
        write(&p.join("smaps_rollup"), "Pss:  18446744073709551615 kB\n");
        write(&p.join("environ"), "SLURM_JOB_ID=77\0");
    }
    let mut cfg = config(
        &proc_root,
        Watch::Job {
            id: "77".into(),
            cgroup: None,
        },
    );
    cfg.pss = true;
    let mut s = Sampler::new(cfg, NodeSources::default());
    let a = s.sample(0.0, 0.0, None);
    assert_eq!(a.procs, Some(2));
    let huge = u64::MAX as f64 / 100.0;
    assert!(close(a.cpu_user_s.unwrap(), huge, huge * 1e-9), "{a:?}");
    assert!(a.rss_mb.unwrap().is_finite() && a.rss_mb.unwrap() > 0.0);
    assert!(a.read_mb.unwrap() > 0.0 && a.pss_mb.unwrap() > 0.0);
    assert!(a.hwm_mb.unwrap() > 0.0 && a.swap_mb.unwrap() > 0.0);
    // One process ends: its counters join the dead totals.
    fs::remove_dir_all(proc_root.join("501")).unwrap();
    let b = s.sample(1.0, 1.0, None);
    assert_eq!(b.procs, Some(1));
    assert!(b.cpu_user_s.unwrap() >= a.cpu_user_s.unwrap());
    assert_eq!(b.cpu_cores, Some(0.0));

    // Node counters: two NUMA nodes and two RAPL packages whose deltas
    // add up past u64::MAX.
    let sys_root = d.path().join("sys");
    let numastat = |hit: u64| {
        format!("numa_hit {hit}\nnuma_miss {hit}\nnuma_foreign 0\ninterleave_hit 0\nlocal_node 0\nother_node 0\n")
    };
    let rapl = |n: u32| sys_root.join(format!("class/powercap/intel-rapl:{n}"));
    for n in 0..2 {
        write(
            &sys_root.join(format!("devices/system/node/node{n}/numastat")),
            &numastat(0),
        );
        write(&rapl(n).join("name"), &format!("package-{n}\n"));
        write(&rapl(n).join("energy_uj"), "0\n");
        write(
            &rapl(n).join("max_energy_range_uj"),
            &format!("{}\n", u64::MAX),
        );
    }
    let node = NodeSources::discover(&proc_root, &sys_root);
    assert_eq!((node.numa.len(), node.rapl.len()), (2, 2));
    let mut buf = Vec::new();
    let first = node.read(&mut buf);
    for n in 0..2 {
        write(
            &sys_root.join(format!("devices/system/node/node{n}/numastat")),
            &numastat(u64::MAX),
        );
        write(&rapl(n).join("energy_uj"), &format!("{}\n", u64::MAX));
    }
    let second = node.read(&mut buf);
    let r = node.rates(&first, &second, 1.0);
    assert!(close(r.numa_miss_rate.unwrap(), 0.5, 1e-9));
    assert!(r.energy_j.unwrap() > 0.0);
}

// Issue 22: the job-wide figures from the job's cgroup, the per-process
// detail on a slower cadence.

const V2_SESSION: &str = "cgroup-v2/sys/fs/cgroup/user.slice/user-1000.slice/session-520.scope";

/// A SLURM cgroup v2 job as slurmstepd lays it out: the job folder (with
/// the real files of the v2 fixture's session scope, and an `io.stat` in
/// the kernel's format, which that fixture lacks), nested steps (batch,
/// extern, step 0 with two tasks) and slurmstepd's own `slurm`
/// sub-cgroups. The real procfs process 26231 runs the batch step; a copy
/// of it, 26232, runs task 0 of step 0. Returns (proc root, sys root, job
/// folder).
fn slurm_v2_job(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let proc_root = root.join("proc");
    let sys_root = root.join("sys");
    copy_tree(&fixtures().join("proc/26231"), &proc_root.join("26231"));
    copy_tree(&fixtures().join("proc/26231"), &proc_root.join("26232"));
    let job = sys_root.join("fs/cgroup/system.slice/slurmstepd.scope/job_42");
    copy_tree(&fixtures().join(V2_SESSION), &job);
    write(
        &sys_root.join("fs/cgroup/cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    write(
        &job.join("io.stat"),
        "254:0 rbytes=1048576 wbytes=2097152 rios=10 wios=20 dbytes=0 dios=0\n",
    );
    write(&job.join("step_batch/user/task_0/cgroup.procs"), "26231\n");
    write(&job.join("step_batch/slurm/cgroup.procs"), "900\n");
    write(&job.join("step_batch/slurm/pids.current"), "3\n");
    write(&job.join("step_0/user/task_0/cgroup.procs"), "26232\n");
    write(&job.join("step_0/user/task_1/cgroup.procs"), "");
    write(&job.join("step_0/slurm/cgroup.procs"), "901\n");
    write(&job.join("step_0/slurm/pids.current"), "4\n");
    write(&job.join("step_extern/user/task_special/cgroup.procs"), "");
    (proc_root, sys_root, job)
}

fn job_sampler(proc_root: &Path, cg: JobCgroup, every: u64, pss: bool) -> Sampler {
    let mut cfg = config(
        proc_root,
        Watch::Job {
            id: "42".into(),
            cgroup: Some(cg),
        },
    );
    cfg.detail_every = every;
    cfg.pss = pss;
    Sampler::new(cfg, NodeSources::default())
}

/// Replaces `key value` in a cgroup file.
fn bump(file: &Path, key: &str, value: u64) {
    let text = fs::read_to_string(file).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((k, _)) if k == key => format!("{k} {value}"),
            _ => l.to_string(),
        })
        .collect();
    assert_ne!(
        out.join("\n") + "\n",
        text,
        "{key} not in {}",
        file.display()
    );
    write(file, &(out.join("\n") + "\n"));
}

#[test]
fn cgroup_v2_job_figures_come_from_its_files_and_processes_only_on_detail_samples() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root, job) = slurm_v2_job(d.path());
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    assert_eq!(cg.dir, job);
    let mut s = job_sampler(&proc_root, cg, 3, true);
    let c = s.cgroup_counters();
    assert!(s.cgroup_path(), "cpu.stat and memory.stat: the cgroup path");
    let src = s.sources();
    assert_eq!(src["rss_mb"], "cgroup memory.stat");
    assert_eq!(src["page_cache_mb"], "cgroup memory.stat");
    assert_eq!(src["hwm_mb"], "cgroup memory.peak");
    assert_eq!(src["swap_mb"], "cgroup memory.swap.current");
    assert_eq!(src["cpu_user_s"], "cgroup cpu.stat");
    assert_eq!(src["threads"], "cgroup pids.current");
    assert_eq!(src["procs"], "cgroup cgroup.procs, detail samples");
    assert_eq!(src["read_mb"], "cgroup io.stat");
    assert_eq!(src["pss_mb"], "proc smaps_rollup, detail samples");

    let a = s.sample(0.0, 0.0, c);
    assert!(s.last_was_detail(), "the first sample is a detail sample");
    assert_eq!(a.procs, Some(2), "both steps, slurmstepd left out");
    // memory.stat: anon 1411100672 + shmem 20480; file 8621432832 - shmem.
    assert!(close(a.rss_mb.unwrap(), 1411121152.0 / MB, 0.001), "{a:?}");
    assert!(close(a.page_cache_mb.unwrap(), 8621412352.0 / MB, 0.001));
    assert!(close(a.hwm_mb.unwrap(), 18772946944.0 / MB, 0.001));
    assert!(close(a.swap_mb.unwrap(), 17715200.0 / MB, 0.001));
    assert!(close(a.cpu_user_s.unwrap(), 2915.072, 0.001));
    assert!(close(a.cpu_sys_s.unwrap(), 696.275, 0.001));
    assert_eq!(
        a.threads,
        Some(148 - 3 - 4),
        "pids.current less slurmstepd's"
    );
    assert_eq!(a.read_mb, Some(1.0));
    assert_eq!(a.write_mb, Some(2.0));
    assert!(a.pss_mb.is_some(), "--pss on a detail sample");

    // Process 26232 leaves /proc while still listed: a sample without
    // detail reads neither /proc nor cgroup.procs (the task count is
    // there), and the job goes on.
    fs::remove_dir_all(proc_root.join("26232")).unwrap();
    bump(&job.join("cpu.stat"), "usage_usec", 3611347518 + 2_000_000);
    write(
        &job.join("io.stat"),
        "254:0 rbytes=3145728 wbytes=2097152 rios=12 wios=20 dbytes=0 dios=0\n",
    );
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 1.0, c);
    assert!(!s.last_was_detail());
    assert_eq!(b.procs, None);
    assert_eq!(s.process_count(), 2);
    assert!(close(b.cpu_cores.unwrap(), 2.0, 1e-9));
    assert_eq!(b.cpu_frac, Some(1.0));
    assert_eq!(b.read_mbps, Some(2.0));
    assert_eq!(b.write_mbps, Some(0.0));
    assert_eq!(b.threads, Some(141));
    assert!(b.rss_mb.is_some() && b.swap_mb.is_some() && b.hwm_mb.is_some());
    assert_eq!(b.pss_mb, None, "per-process only: not on this sample");
    let c = s.cgroup_counters();
    let _ = s.sample(2.0, 2.0, c);
    assert!(!s.last_was_detail());
    // The fourth sample (one in three after the first) reads /proc again.
    let c = s.cgroup_counters();
    let e = s.sample(3.0, 3.0, c);
    assert!(s.last_was_detail());
    assert_eq!(e.procs, Some(1), "26232 is gone from /proc");
    assert!(e.pss_mb.is_some());
    // A sample asked to be the last is a detail sample.
    let c = s.cgroup_counters();
    let _ = s.sample(4.0, 4.0, c);
    assert!(!s.last_was_detail());
    s.detail_next();
    let c = s.cgroup_counters();
    let f = s.sample(5.0, 5.0, c);
    assert!(s.last_was_detail());
    assert!(f.pss_mb.is_some());
    assert!(!s.cgroup_ended());
    // The task count falls to slurmstepd's alone: the pids are listed to
    // see whether any process is left. One is (26231; 26232 is listed too).
    let c = s.cgroup_counters();
    let _ = s.sample(6.0, 6.0, c);
    assert!(
        !s.last_was_detail(),
        "one in three after the last detail sample"
    );
    write(&job.join("pids.current"), "7\n");
    let c = s.cgroup_counters();
    let g = s.sample(7.0, 7.0, c);
    assert!(!s.last_was_detail());
    assert_eq!((g.threads, g.procs), (Some(0), Some(2)));
    // None is: the job has ended on this node.
    write(&job.join("step_batch/user/task_0/cgroup.procs"), "");
    write(&job.join("step_0/user/task_0/cgroup.procs"), "");
    let c = s.cgroup_counters();
    let h = s.sample(8.0, 8.0, c);
    assert!(s.last_was_detail(), "three after the one asked for");
    assert_eq!(h.procs, Some(0));
    assert_eq!(s.process_count(), 0);
}

#[test]
fn cgroup_v2_kernel_without_memory_peak_keeps_the_running_maximum() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root, job) = slurm_v2_job(d.path());
    fs::remove_file(job.join("memory.peak")).unwrap();
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    let mut s = job_sampler(&proc_root, cg, 10, false);
    let c = s.cgroup_counters();
    assert_eq!(s.sources()["hwm_mb"], "running maximum of rss_mb");
    let a = s.sample(0.0, 0.0, c);
    assert_eq!(a.hwm_mb, a.rss_mb, "the first sample's RSS");
    // RSS goes up, then down: the peak stays at the highest.
    bump(&job.join("memory.stat"), "anon", 2 * 1024 * 1024 * 1024);
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 1.0, c);
    assert!(close(b.rss_mb.unwrap(), 2048.0 + 0.02, 0.001), "{b:?}");
    assert_eq!(b.hwm_mb, b.rss_mb);
    bump(&job.join("memory.stat"), "anon", 100 * 1024 * 1024);
    let c = s.cgroup_counters();
    let e = s.sample(2.0, 2.0, c);
    assert!(close(e.rss_mb.unwrap(), 100.02, 0.001));
    assert_eq!(e.hwm_mb, b.hwm_mb);
    assert!(
        !s.cgroup_ended(),
        "a file absent from the start is not a file that disappeared"
    );
}

/// A SLURM cgroup v1 job (`<controller>/slurm/uid_0/job_42/step_0/task_0`)
/// in the memory, cpuacct, blkio and pids hierarchies, from the files
/// captured on the project's VM (`cgroup-v1-local`), with device lines
/// written into the blkio file (the capture had none). Returns (proc
/// root, sys root).
fn slurm_v1_local_job(root: &Path) -> (PathBuf, PathBuf) {
    let proc_root = root.join("proc");
    let sys_root = root.join("sys");
    copy_tree(&fixtures().join("proc/26231"), &proc_root.join("26231"));
    let job = "slurm/uid_0/job_42";
    let mut lines = String::new();
    for (n, c) in ["memory", "cpuacct", "blkio", "pids"].iter().enumerate() {
        let dir = sys_root.join("fs/cgroup").join(c).join(job);
        copy_tree(&fixtures().join("cgroup-v1-local").join(c), &dir);
        write(&dir.join("step_0/task_0/cgroup.procs"), "26231\n");
        write(&dir.join("step_extern/cgroup.procs"), "");
        lines.push_str(&format!("{}:{c}:/{job}/step_0/task_0\n", n + 2));
    }
    write(
        &sys_root
            .join("fs/cgroup/blkio")
            .join(job)
            .join("blkio.throttle.io_service_bytes_recursive"),
        "254:0 Read 8192\n254:0 Write 8388608\n254:0 Sync 8388608\n254:0 Async 8192\n254:0 Discard 0\n254:0 Total 8396800\nTotal 8396800\n",
    );
    write(&proc_root.join("26231/cgroup"), &lines);
    (proc_root, sys_root)
}

#[test]
fn cgroup_v1_job_from_a_real_capture_gives_rss_cache_tasks_and_io() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = slurm_v1_local_job(d.path());
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    assert!(cg.blkio.is_some() && cg.pids.is_some());
    let text = fs::read_to_string(proc_root.join("26231/cgroup")).unwrap();
    assert_eq!(
        cgroup::job_cgroup_from_lines(&sys_root, &text, "42").unwrap(),
        cg
    );
    let usage = cg.cpuacct.as_ref().unwrap().join("cpuacct.usage");
    let mut s = job_sampler(&proc_root, cg, 10, false);
    let c = s.cgroup_counters();
    assert!(s.cgroup_path());
    let src = s.sources();
    assert_eq!(src["cpu_user_s"], "cgroup cpuacct.stat");
    assert_eq!(src["hwm_mb"], "cgroup memory.max_usage_in_bytes");
    assert_eq!(src["swap_mb"], "cgroup memory.stat");
    assert_eq!(
        src["read_mb"],
        "cgroup blkio.throttle.io_service_bytes_recursive"
    );
    assert_eq!(src["threads"], "cgroup pids.current");
    let a = s.sample(0.0, 0.0, c);
    assert!(close(
        a.rss_mb.unwrap(),
        (38555648.0 + 4194304.0) / MB,
        0.001
    ));
    assert!(close(
        a.page_cache_mb.unwrap(),
        (12963840.0 - 4194304.0) / MB,
        0.001
    ));
    assert!(close(a.hwm_mb.unwrap(), 60989440.0 / MB, 0.001));
    assert_eq!(a.swap_mb, Some(0.0));
    assert_eq!((a.cpu_user_s, a.cpu_sys_s), (Some(0.27), Some(0.27)));
    assert_eq!(a.threads, Some(4), "one process, four tasks");
    assert_eq!(a.procs, Some(1));
    assert!(close(a.read_mb.unwrap(), 8192.0 / MB, 0.001));
    assert_eq!(a.write_mb, Some(8.0));
    write(&usage, &format!("{}\n", 549833842u64 + 500_000_000));
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 2.0, c);
    assert!(close(b.cpu_cores.unwrap(), 0.25, 1e-9));
    assert_eq!(b.read_mbps, Some(0.0));
}

#[test]
fn v1_job_without_pids_or_blkio_takes_threads_and_io_from_detail_samples() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = slurm_v1_local_job(d.path());
    for c in ["blkio", "pids"] {
        fs::remove_dir_all(sys_root.join("fs/cgroup").join(c)).unwrap();
    }
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    let mut s = job_sampler(&proc_root, cg, 2, false);
    let c = s.cgroup_counters();
    assert!(s.cgroup_path());
    assert_eq!(s.sources()["threads"], "proc stat, detail samples");
    assert_eq!(s.sources()["read_mb"], "proc io, detail samples");
    let a = s.sample(0.0, 0.0, c);
    assert_eq!(a.threads, Some(1), "the fixture process's own stat");
    assert!(close(a.read_mb.unwrap(), 1024.0 / MB, 0.001), "its io");
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 1.0, c);
    assert_eq!((b.threads, b.read_mb, b.read_mbps), (None, None, None));
    assert!(b.rss_mb.is_some() && b.cpu_user_s.is_some());
    let io = proc_root.join("26231/io");
    let text = fs::read_to_string(&io).unwrap().replace(
        "read_bytes: 1024",
        &format!("read_bytes: {}", 1024 + 4 * 1048576),
    );
    write(&io, &text);
    let c = s.cgroup_counters();
    let e = s.sample(2.0, 2.0, c);
    assert_eq!(e.threads, Some(1));
    // The rate covers the two seconds since the last detail sample.
    assert_eq!(e.read_mbps, Some(2.0));
}

// Issue 31: on the test cluster only the memory controller had the job's
// cgroup (cpuacct and blkio at the root), so every sample read every
// process's files: 0.75 ms a sample with 1 process, 16.2 ms with 512. Memory
// comes from the cgroup every sample; CPU, threads and I/O from the
// processes on detail samples only, carried between (cumulative), the busy
// cores over the time since the last CPU reading.
#[test]
fn a_v1_job_cgroup_with_memory_only_reads_the_processes_on_detail_samples_only() {
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = slurm_v1_local_job(d.path());
    for c in ["cpuacct", "blkio", "pids"] {
        fs::remove_dir_all(sys_root.join("fs/cgroup").join(c)).unwrap();
    }
    // 24 processes (copies of the captured one): with the CPU from the
    // processes, a detail sample comes once for each 8 of them, one in 3.
    let mut pids = vec!["26231".to_string()];
    for p in 30001..30024 {
        copy_tree(&proc_root.join("26231"), &proc_root.join(p.to_string()));
        pids.push(p.to_string());
    }
    let task = sys_root.join("fs/cgroup/memory/slurm/uid_0/job_42/step_0/task_0/cgroup.procs");
    write(&task, &(pids.join("\n") + "\n"));
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    assert!(cg.cpuacct.is_none());
    let mut s = job_sampler(&proc_root, cg, 20, false);
    let c = s.cgroup_counters();
    assert!(s.cgroup_path(), "memory alone is the cgroup path");
    let src = s.sources();
    assert_eq!(src["rss_mb"], "cgroup memory.stat");
    assert_eq!(src["cpu_user_s"], "proc stat, detail samples");
    assert_eq!(src["threads"], "proc stat, detail samples");
    let a = s.sample(0.0, 0.0, c);
    assert!(s.last_was_detail());
    assert_eq!(a.procs, Some(24));
    let user0 = a.cpu_user_s.unwrap();
    // The process burns 2 s of CPU (200 ticks) before the next samples.
    let stat = proc_root.join("26231/stat");
    let text = fs::read_to_string(&stat).unwrap();
    let mut f: Vec<String> = text.split(' ').map(str::to_string).collect();
    let utime: u64 = f[13].parse().unwrap();
    f[13] = (utime + 200).to_string();
    write(&stat, &f.join(" "));
    let c = s.cgroup_counters();
    let b = s.sample(1.0, 1.0, c);
    assert!(!s.last_was_detail(), "no detail on the second sample");
    assert!(b.rss_mb.is_some(), "memory every sample");
    assert_eq!(b.cpu_user_s, Some(user0), "the last reading carried");
    assert_eq!((b.cpu_cores, b.threads), (None, None), "not read: absent");
    let c = s.cgroup_counters();
    let _ = s.sample(2.0, 2.0, c);
    let c = s.cgroup_counters();
    let e = s.sample(3.0, 3.0, c);
    assert!(s.last_was_detail(), "one in 24 / 8 = 3");
    assert!(close(e.cpu_user_s.unwrap(), user0 + 2.0, 1e-6), "{e:?}");
    // 2 CPU seconds over the 3 s since the last CPU reading.
    assert!(close(e.cpu_cores.unwrap(), 2.0 / 3.0, 0.001), "{e:?}");
}

#[test]
fn each_v2_cgroup_file_that_disappears_ends_the_job_with_a_last_sample() {
    for (file, figure) in [
        ("memory.stat", cgroup::Figure::Memory),
        ("cpu.stat", cgroup::Figure::Cpu),
        ("memory.peak", cgroup::Figure::Peak),
        ("memory.swap.current", cgroup::Figure::Swap),
        ("io.stat", cgroup::Figure::Io),
        ("pids.current", cgroup::Figure::Tasks),
    ] {
        let d = tempfile::tempdir().unwrap();
        let (proc_root, sys_root, job) = slurm_v2_job(d.path());
        let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
        let mut s = job_sampler(&proc_root, cg, 10, false);
        let c = s.cgroup_counters();
        let a = s.sample(0.0, 0.0, c);
        fs::remove_file(job.join(file)).unwrap();
        let c = s.cgroup_counters();
        assert!(s.cgroup_ended(), "{file}");
        assert_eq!(s.lost_figures(), [figure], "{file}");
        let b = s.sample(1.0, 1.0, c);
        // The last sample keeps the cumulative counters.
        assert_eq!(b.cpu_user_s, a.cpu_user_s, "{file}");
        assert_eq!(b.read_mb, a.read_mb, "{file}");
        assert_eq!(b.hwm_mb, a.hwm_mb, "{file}");
        match file {
            "memory.stat" => assert_eq!((b.rss_mb, b.page_cache_mb), (None, None)),
            "cpu.stat" => assert_eq!(b.cpu_cores, Some(0.0)),
            "memory.swap.current" => assert_eq!(b.swap_mb, None),
            "io.stat" => assert_eq!(b.read_mbps, None),
            "pids.current" => assert_eq!(b.threads, None),
            _ => assert!(b.rss_mb.is_some()),
        }
    }
    // The whole folder.
    let d = tempfile::tempdir().unwrap();
    let (proc_root, sys_root, job) = slurm_v2_job(d.path());
    let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
    let mut s = job_sampler(&proc_root, cg, 10, false);
    let c = s.cgroup_counters();
    let a = s.sample(0.0, 0.0, c);
    fs::remove_dir_all(&job).unwrap();
    let c = s.cgroup_counters();
    assert!(c.is_none() && s.cgroup_ended());
    let b = s.sample(1.0, 1.0, c);
    assert_eq!(b.procs, Some(0));
    assert_eq!(b.cpu_user_s, a.cpu_user_s);
}

#[test]
fn each_v1_cgroup_file_that_disappears_ends_the_job_with_a_last_sample() {
    for (ctl, file) in [
        ("memory", "memory.stat"),
        ("memory", "memory.max_usage_in_bytes"),
        ("cpuacct", "cpuacct.stat"),
        ("blkio", "blkio.throttle.io_service_bytes_recursive"),
        ("pids", "pids.current"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let (proc_root, sys_root) = slurm_v1_local_job(d.path());
        let cg = cgroup::find_slurm_job_cgroup(&sys_root, "42", None).unwrap();
        let mut s = job_sampler(&proc_root, cg, 10, false);
        let c = s.cgroup_counters();
        let a = s.sample(0.0, 0.0, c);
        fs::remove_file(
            sys_root
                .join("fs/cgroup")
                .join(ctl)
                .join("slurm/uid_0/job_42")
                .join(file),
        )
        .unwrap();
        let c = s.cgroup_counters();
        assert!(s.cgroup_ended(), "{file}");
        let b = s.sample(1.0, 1.0, c);
        assert_eq!(b.cpu_user_s, a.cpu_user_s, "{file}");
        assert_eq!(b.write_mb, a.write_mb, "{file}");
    }
}
