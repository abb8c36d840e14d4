//! `hpc-probe --sources`: the real binary on fixture trees built in
//! temporary folders (the shape `hpc doctor` hands it), one assertion per
//! line, and the lines as `hpc doctor`'s `say` prints them against the
//! patterns tests/hpc.sh greps for.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use hpc_testkit::{show, text, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-probe"));

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc-sys")
}

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::copy(from, to).unwrap();
}

/// `hpc-probe --sources` on the tree `root` (`root/proc`, `root/sys`,
/// `root/dev`) with `env` set and the GPU variables cleared; it must exit
/// 0 with nothing on stderr. Returns its lines.
fn sources(root: &Path, env: &[(&str, &Path)]) -> Vec<String> {
    let mut c = TOOL.command(&[]);
    for v in [
        "HPC_PROBE_GPU_FIXTURE",
        "SLURM_JOB_ID",
        "SLURM_JOB_GPUS",
        "CUDA_VISIBLE_DEVICES",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c
        .arg("--sources")
        .arg("--proc-root")
        .arg(root.join("proc"))
        .arg("--sys-root")
        .arg(root.join("sys"))
        .arg("--dev-root")
        .arg(root.join("dev"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(text(&o.stderr), "", "{}", show(&o));
    let lines: Vec<String> = text(&o.stdout).lines().map(str::to_owned).collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        [
            "cgroup",
            "perf",
            "numa",
            "lustre",
            "rapl",
            "infiniband",
            "gpus"
        ],
        "{}",
        show(&o)
    );
    lines
}

/// A line as `hpc doctor`'s `say` prints it: `printf '%-6s %s: %s\n'`.
fn said(line: &str) -> String {
    let mut it = line.splitn(3, ' ');
    let (s, n, d) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    format!("{s:<6} {n}: {d}")
}

/// Whether `line` matches the pattern `^STATUS *REST` (REST literal).
fn greps(line: &str, status: &str, rest: &str) -> bool {
    line.strip_prefix(status)
        .is_some_and(|r| r.trim_start_matches(' ').starts_with(rest))
}

/// One GPU's recorded NVML reading.
const ONE_GPU: &str = r#"{"index":0,"minor_number":0,"uuid":"GPU-1","name":"NVIDIA A100-SXM4-80GB","memory_info":{"total":85899345920,"free":85899345920,"used":0},"utilization_rates":{"gpu":0,"memory":0},"power_usage":58000,"running_compute_processes":[]}
"#;

const PERF_4: &str =
    "counters off for users: perf_event_paranoid is 4 (2 or less needed; admins: sysctl kernel.perf_event_paranoid=2)";

/// The tree of tests/hpc.sh's doctor check, with the files the probe
/// itself reads in each place: numastat per node, a mounted file
/// system's llite stats, a port's data counters, a v2 cgroup root.
fn complete_tree(root: &Path) {
    let f = fixtures();
    for n in ["node0", "node1"] {
        let rel = format!("sys/devices/system/node/{n}/numastat");
        copy(&f.join(&rel), &root.join(&rel));
    }
    copy(
        &f.join("proc/fs/lustre/llite/lustrefs-ffff88105db50000/stats"),
        &root.join("proc/fs/lustre/llite/scratch-ffff8810/stats"),
    );
    let port = root.join("sys/class/infiniband/mlx5_0/ports/1/counters");
    write(&port.join("port_rcv_data"), "1000\n");
    write(&port.join("port_xmit_data"), "2000\n");
    write(
        &root.join("sys/class/powercap/intel-rapl:0/energy_uj"),
        "1\n",
    );
    write(&root.join("proc/sys/kernel/perf_event_paranoid"), "4\n");
    write(
        &root.join("sys/fs/cgroup/cgroup.controllers"),
        "cpu memory\n",
    );
    write(&root.join("dev/nvidia0"), "");
}

#[test]
fn a_tree_with_every_source_gives_ok_lines_with_their_details() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    complete_tree(root);
    let gpus = root.join("gpus.ndjson");
    write(&gpus, ONE_GPU);
    let l = sources(root, &[("HPC_PROBE_GPU_FIXTURE", &gpus)]);
    assert_eq!(
        l[0],
        format!("ok cgroup v2 (unified) at {}/sys/fs/cgroup", root.display())
    );
    assert_eq!(l[1], format!("absent perf {PERF_4}"));
    assert_eq!(l[2], "ok numa 2 NUMA nodes");
    assert_eq!(
        l[3],
        "ok lustre Lustre client found: Lustre rates are sampled (1 file system)"
    );
    assert_eq!(l[4], "ok rapl RAPL energy readable (1 package)");
    assert_eq!(l[5], "ok infiniband mlx5_0 (1 port)");
    assert_eq!(
        l[6],
        "ok gpus 1 GPU device on this node, read from HPC_PROBE_GPU_FIXTURE (recorded NVML readings)"
    );
    // What tests/hpc.sh greps in `hpc doctor`'s output.
    let doctor: Vec<String> = l.iter().map(|x| said(x)).collect();
    for (status, rest) in [
        ("ok", "lustre"),
        ("ok", "infiniband: mlx5_0"),
        ("ok", "rapl"),
        ("ok", "numa: 2 NUMA"),
        ("ok", "gpus: 1 GPU"),
        ("absent", "perf: "),
    ] {
        assert!(
            doctor.iter().any(|x| greps(x, status, rest)),
            "no ^{status} *{rest} in {doctor:#?}"
        );
    }
    assert!(doctor
        .iter()
        .any(|x| x.starts_with("absent perf: ") && x.contains("perf_event_paranoid is 4")));
}

#[test]
fn an_empty_tree_gives_absent_lines() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let r = root.display();
    let l = sources(root, &[]);
    assert_eq!(
        l[0],
        format!("absent cgroup no cgroup file system found under {r}/sys/fs/cgroup: a job's processes are found by SLURM_JOB_ID in their environment")
    );
    assert_eq!(
        l[1],
        format!("absent perf no perf_event support in this kernel (or container), no {r}/proc/sys/kernel/perf_event_paranoid: no CPI or cache-miss rates")
    );
    assert_eq!(
        l[2],
        format!("absent numa no NUMA information in {r}/sys/devices/system/node: numa_misplaced is not evaluated")
    );
    assert_eq!(l[3], "absent lustre no Lustre client on this node");
    assert_eq!(l[4], "absent rapl no RAPL energy counters on this node");
    assert_eq!(
        l[5],
        "absent infiniband no InfiniBand adapters on this node"
    );
    // NVML, where the machine has it, sees the machine's GPUs whatever
    // the tree: the probe would read them.
    if hpc_probe::gpu::NvmlSource::open().is_err() {
        assert_eq!(l[6], "absent gpus no GPUs on this node");
    }
    // A fixture naming no GPU is none, on any machine.
    let none = root.join("none.ndjson");
    write(&none, "");
    let l = sources(root, &[("HPC_PROBE_GPU_FIXTURE", &none)]);
    assert_eq!(
        l[6],
        "absent gpus no GPUs on this node (fixture lists none)"
    );
    let doctor: Vec<String> = l.iter().map(|x| said(x)).collect();
    for name in ["lustre", "infiniband", "rapl", "gpus", "cgroup", "perf"] {
        assert!(
            doctor.iter().any(|x| greps(x, "absent", name)),
            "no ^absent {name} in {doctor:#?}"
        );
    }
}

/// The tree tests/hpc.sh builds today: folders where the probe reads
/// files. The probe finds no NUMA statistics, no mounted Lustre file
/// system and no InfiniBand counters there, and without NVML it cannot
/// read the GPU the device file shows.
#[test]
fn folders_without_the_files_the_probe_reads_are_not_sources() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let r = root.display();
    for p in [
        "proc/fs/lustre",
        "sys/class/infiniband/mlx5_0",
        "sys/devices/system/node/node0",
        "sys/devices/system/node/node1",
    ] {
        fs::create_dir_all(root.join(p)).unwrap();
    }
    write(&root.join("dev/nvidia0"), "");
    write(
        &root.join("sys/class/powercap/intel-rapl:0/energy_uj"),
        "1\n",
    );
    write(&root.join("proc/sys/kernel/perf_event_paranoid"), "4\n");
    let l = sources(root, &[]);
    assert_eq!(l[1], format!("absent perf {PERF_4}"));
    assert_eq!(
        l[2],
        format!("fail numa 2 NUMA nodes under {r}/sys/devices/system/node but no numastat in them: numa_misplaced is not evaluated")
    );
    assert_eq!(
        l[3],
        format!("absent lustre Lustre client found but no mounted file system's stats ({r}/proc/fs/lustre/llite/*/stats, {r}/sys/kernel/debug/lustre/llite/*/stats): no Lustre rates")
    );
    assert_eq!(l[4], "ok rapl RAPL energy readable (1 package)");
    assert_eq!(
        l[5],
        "absent infiniband mlx5_0 without port data counters (ports/N/counters/port_rcv_data): no InfiniBand rates"
    );
    if hpc_probe::gpu::NvmlSource::open().is_err() {
        let want = format!("fail gpus 1 GPU device on this node ({r}/dev/nvidia0) but no GPU use is sampled: NVML not available");
        assert!(l[6].starts_with(&want), "{}", l[6]);
    }
}

#[test]
fn the_shared_fixture_trees_and_a_v1_cgroup() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let f = fixtures();
    // The real files: three NUMA nodes, a Lustre mount, RAPL, two adapters.
    let o = Command::new("cp")
        .arg("-r")
        .arg(f.join("proc"))
        .arg(f.join("sys"))
        .arg(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    for c in ["memory", "cpu,cpuacct", "devices"] {
        fs::create_dir_all(root.join("sys/fs/cgroup").join(c)).unwrap();
    }
    let l = sources(root, &[]);
    let r = root.display();
    assert_eq!(
        l[0],
        format!("ok cgroup v1, memory controller at {r}/sys/fs/cgroup/memory, cpuacct at {r}/sys/fs/cgroup/cpu,cpuacct")
    );
    assert_eq!(l[2], "ok numa 3 NUMA nodes");
    assert_eq!(
        l[3],
        "ok lustre Lustre client found: Lustre rates are sampled (1 file system)"
    );
    assert_eq!(l[4], "ok rapl RAPL energy readable (1 package)");
    assert_eq!(l[5], "ok infiniband mlx4_0 mlx5_0 (3 ports)");
}

#[test]
fn sources_take_no_target_and_no_out() {
    for extra in [
        &["--pid", "1"][..],
        &["--job", "42"],
        &["--out", "/dev/null"],
        &["--", "true"],
    ] {
        let o = TOOL.command(&["--sources"]).args(extra).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", show(&o));
        assert!(text(&o.stderr).contains("--sources"), "{}", show(&o));
    }
}
