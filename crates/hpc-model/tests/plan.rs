//! hpc-model plan and spool (issue 20): the wrapper runs the script
//! unchanged with its own interpreter and finalizes it on every exit path;
//! the options are in sbatch's units; the analysis is spooled with the job
//! id by the tool, not by sed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use hpc_testkit::Tool;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));

fn write(dir: &Path, name: &str, text: &str, exec: bool) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    if exec {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p.to_string_lossy().into_owned()
}

/// Plans `script`, runs the wrapper with sh as SLURM would (job id 77), and
/// returns (exit status, the log of the fake monitor and finalizer, stdout).
fn run_wrapped(dir: &Path, script: &str) -> (i32, String, String) {
    let wrap = wrap(dir, script);
    let out = Command::new("sh")
        .arg(&wrap)
        .arg("arg one")
        .env("SLURM_JOB_ID", "77")
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        std::fs::read_to_string(dir.join("log")).unwrap_or_default(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Plans `script` with a fake monitor and finalizer that log to `log`, and
/// returns the wrapper's path.
fn wrap(dir: &Path, script: &str) -> std::path::PathBuf {
    wrap_with(dir, script, "", &[])
}

/// [`wrap`], the loggers writing `tail` (sh text) after their argument,
/// and `extra` options given to plan.
fn wrap_with(dir: &Path, script: &str, tail: &str, extra: &[&str]) -> std::path::PathBuf {
    let log = dir.join("log");
    let logger = |what: &str| format!("#!/bin/sh\necho \"{what} $1{tail}\" >>{}\n", log.display());
    let mon = write(dir, "mon", &logger("monitor"), true);
    let fin = write(dir, "fin", &logger("finalize"), true);
    let s = write(dir, "job.sbatch", script, false);
    let wrap = dir.join("wrapped.sbatch");
    let mut args = vec![
        "plan",
        &s,
        "--no-recommend",
        "--wrap",
        wrap.to_str().unwrap(),
        "--monitor",
        &mon,
        "--finalize",
        &fin,
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = TOOL.cli(&args, "");
    assert_eq!(code, 0, "{err}");
    wrap
}

#[test]
fn the_job_reads_its_standard_input() {
    // Issue 29: the script ran in the background, so a job with
    // #SBATCH --input=FILE read /dev/null.
    let dir = tempfile::tempdir().unwrap();
    let wrap = wrap(dir.path(), "#!/bin/sh\nread line\necho \"read: $line\"\n");
    let out = hpc_testkit::feed(
        Command::new("sh")
            .arg(&wrap)
            .env("SLURM_JOB_ID", "77")
            .current_dir(dir.path()),
        b"from the input file\n",
    );
    assert!(out.status.success());
    assert_eq!(
        hpc_testkit::text(&out.stdout),
        "read: from the input file\n"
    );
}

/// Runs the wrapper of a script that traps `sig` (prints "got SIG", exits
/// 7), sends `sig` to the wrapper alone once the script runs, as slurmd
/// signals the batch shell, and returns its output; fails when the script is
/// still running 10 s later (it never got the signal).
fn signalled(dir: &Path, sig: &str) -> std::process::Output {
    let wrap = wrap(
        dir,
        &format!(
            "#!/bin/bash\ntrap 'echo got {sig}; exit 7' {sig}\ntouch ready\nwhile :; do sleep 0.05; done\n"
        ),
    );
    let mut child = Command::new("sh")
        .arg(&wrap)
        .env("SLURM_JOB_ID", "77")
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ready = dir.join("ready");
    for _ in 0..200 {
        if ready.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(ready.exists(), "{sig}: the script did not start");
    let sent = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = Command::new("pkill")
                .args(["-KILL", "-P", &child.id().to_string()])
                .status();
            let _ = child.kill();
            panic!("{sig}: the script ignored it and ran on");
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_signal_for_the_batch_shell_reaches_the_script_and_the_job_is_finalized() {
    // Issue 29: with --signal=B:USR1@300 the wrapper died of USR1; the
    // script's trap and the finalizer never ran.
    let dir = tempfile::tempdir().unwrap();
    let out = signalled(dir.path(), "USR1");
    assert_eq!(out.status.code(), Some(7), "the script's own exit");
    assert_eq!(hpc_testkit::text(&out.stdout), "got USR1\n");
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(log.ends_with("finalize 77\n"), "{log}");
}

#[test]
fn int_and_quit_reach_the_script_as_they_would_without_the_wrapper() {
    // sh starts a background command with SIGINT and SIGQUIT ignored, and
    // the script ran in the background: scancel --signal=INT, a trap on
    // INT and Python's KeyboardInterrupt never fired, and the job ran on.
    for sig in ["INT", "QUIT"] {
        let dir = tempfile::tempdir().unwrap();
        let out = signalled(dir.path(), sig);
        assert_eq!(out.status.code(), Some(7), "{sig}: the script's own exit");
        assert_eq!(hpc_testkit::text(&out.stdout), format!("got {sig}\n"));
    }
}

#[test]
fn an_interpreter_whose_path_holds_an_equals_sign_runs() {
    // env, which sets INT and QUIT back to their defaults, takes a first
    // word with '=' for a variable: such an interpreter exited 127.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("opt=1");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/sh", bin.join("sh")).unwrap();
    let (code, log, out) = run_wrapped(
        dir.path(),
        &format!("#!{}/sh\necho \"ran with $1\"\n", bin.display()),
    );
    assert_eq!((code, out.as_str()), (0, "ran with arg one\n"), "{log}");
    assert!(log.ends_with("finalize 77\n"), "{log}");
}

#[test]
fn the_script_runs_through_its_interpreter_without_exec_permission() {
    // Issue 29: on a noexec TMPDIR every job exited 126. The copy is read
    // by its interpreter, so it needs no exec permission: the wrapper never
    // makes it executable.
    let dir = tempfile::tempdir().unwrap();
    let wrap = wrap(dir.path(), "#!/bin/sh\nls -l \"$0\" | cut -c1-10\n");
    let text = std::fs::read_to_string(&wrap).unwrap();
    assert!(!text.contains("chmod"), "{text}");
    let out = Command::new("sh")
        .arg(&wrap)
        .env("SLURM_JOB_ID", "77")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(hpc_testkit::text(&out.stdout), "-rw-------\n");
}

#[test]
fn a_script_ending_in_exec_is_finalized_with_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let (code, log, out) = run_wrapped(
        dir.path(),
        "#!/bin/bash\n#SBATCH -c 1\necho \"got $1\"\nexec sh -c 'exit 3'\n",
    );
    assert_eq!(code, 3);
    assert_eq!(out, "got arg one\n");
    assert_eq!(log, "monitor start\nmonitor stop\nfinalize 77\n");
}

#[test]
fn the_scripts_own_trap_runs_and_another_interpreter_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let (code, log, out) = run_wrapped(
        dir.path(),
        "#!/bin/bash\ntrap 'echo own trap' EXIT\nexit 0\n",
    );
    assert_eq!((code, out.as_str()), (0, "own trap\n"));
    assert!(log.ends_with("finalize 77\n"), "{log}");
    let (code, log, out) = run_wrapped(
        dir.path(),
        "#!/usr/bin/env python3\n#SBATCH --mem=1G\nimport sys\nprint('py', sys.argv[1])\nsys.exit(5)\n",
    );
    assert_eq!((code, out.as_str()), (5, "py arg one\n"));
    assert!(log.ends_with("finalize 77\n"), "{log}");
}

#[test]
fn the_plan_record_has_the_options_in_sbatch_units_and_the_diff() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(
        dir.path(),
        "mpi.sbatch",
        "#!/bin/sh\n#SBATCH -N 4 --ntasks-per-node=2 -c 8 --mem=100G\n#SBATCH --job-name=\"x --mem=2G y\"\nsrun ./a.out\n",
        false,
    );
    let opts = dir.path().join("opts");
    let an = dir.path().join("an.ndjson");
    let (code, out, err) = TOOL.cli(
        &[
            "plan",
            &s,
            "--format",
            "ndjson",
            "--options",
            opts.to_str().unwrap(),
            "--analysis",
            an.to_str().unwrap(),
            "--",
            "--partition=debug",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "rec", "{out}");
    let v = &lines[1];
    assert_eq!(v["kind"], "plan");
    // No history: nothing changes (no totals written back per node).
    assert_eq!(v["options"], serde_json::json!([]), "{v}");
    assert_eq!(v["analysis"]["request"]["mem_mb"], 409600.0);
    assert_eq!(v["analysis"]["request"]["partition"], "debug");
    assert_eq!(v["analysis"]["request"]["job_name"], "x --mem=2G y");
    assert_eq!(std::fs::read_to_string(&opts).unwrap(), "");
    // spool: the record with the id, in the spool's incoming folder.
    let spool = dir.path().join("spool");
    let (code, _, err) = TOOL.cli(
        &[
            "spool",
            an.to_str().unwrap(),
            "--job-id",
            "123",
            "--spool",
            spool.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let rec = std::fs::read_to_string(spool.join("incoming/123.analysis.ndjson")).unwrap();
    assert!(rec.contains("\"job_id\":\"123\""), "{rec}");
    let (code, _, _) = TOOL.cli(
        &[
            "spool",
            an.to_str().unwrap(),
            "--job-id",
            "1;rm",
            "--spool",
            spool.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 2);
}

/// `n` completed 2-node STAR jobs of the user `ana`, one task a node, whose
/// task peaks at about 2 GiB.
fn star_history(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                concat!(
                    r#"{{"kind":"job","cluster":"c","job_id":"{i}","job_id_raw":"{i}","user":"ana","state":"COMPLETED","end":"2026-01-01T00:00:{i:02}Z","#,
                    r#""elapsed_s":1000,"timelimit_s":7200,"nnodes":2,"alloc_cpus":8,"req_mem_mb":131072,"max_rss_mb":{peak},"total_cpu_s":7000,"is_final":true}}"#,
                    "\n",
                    r#"{{"kind":"analysis","job_id":"{i}","script":"a.sbatch","script_sha256":"00","request":{{}},"tool":"star"}}"#,
                    "\n"
                ),
                i = i,
                peak = 2048 + (i % 5) * 20,
            )
        })
        .collect()
}

#[test]
fn the_sbatch_format_is_the_plans_options_per_node_and_ndjson_gives_the_rec() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(
        dir.path(),
        "star.sbatch",
        "#!/bin/sh\n#SBATCH -N 2 --mem=64G -c 4\nSTAR --runThreadN 4 --genomeDir g\n",
        false,
    );
    let h = write(dir.path(), "h.ndjson", &star_history(12), false);
    // The history is the user's own: the plan is made as `ana`.
    let run = |format: &str| {
        let out = hpc_testkit::feed(
            TOOL.command(&["plan", &s, "--history", &h, "--format", format])
                .env("USER", "ana"),
            b"",
        );
        assert!(out.status.success(), "{}", hpc_testkit::text(&out.stderr));
        hpc_testkit::text(&out.stdout)
    };
    let nd = run("ndjson");
    let lines: Vec<serde_json::Value> = nd
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (rec, plan) = (&lines[0], &lines[1]);
    assert_eq!(rec["kind"], "rec", "{nd}");
    let node = rec["mem_mb"].as_f64().unwrap();
    assert!((2128.0..16384.0).contains(&node), "{nd}");
    let opts: Vec<String> = plan["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap().to_string())
        .collect();
    let sb = run("sbatch");
    let want: Vec<String> = opts.iter().map(|o| format!("#SBATCH {o}")).collect();
    assert_eq!(sb.lines().collect::<Vec<_>>(), want);
    // The advice is per node, as --mem is: written as it is.
    let mem = opts
        .iter()
        .find_map(|o| o.strip_prefix("--mem="))
        .unwrap_or_else(|| panic!("no --mem in {opts:?}"));
    let per_node = hpc_core::slurm::parse_mem(mem, 1024.0 * 1024.0)
        .unwrap()
        .unwrap()
        .mb;
    assert!(
        per_node >= node && per_node < node + 1.0,
        "{mem} for {node}"
    );
}

#[test]
fn a_multi_task_job_is_sized_per_node_from_its_tasks() {
    // Issue 29: a 3-node job with 4 tasks a node, each task peaking at
    // 2 GiB (8 GiB a node), was planned --mem=790M a node.
    let dir = tempfile::tempdir().unwrap();
    let s = write(
        dir.path(),
        "mpi.sbatch",
        "#!/bin/sh\n#SBATCH -N 3 --ntasks-per-node=4 --mem=32G\nsrun ./a.out\n",
        false,
    );
    let hist: String = (0..12)
        .map(|i| {
            format!(
                concat!(
                    r#"{{"kind":"job","cluster":"c","job_id":"{i}","job_id_raw":"{i}","user":"ana","job_name":"mpi.sbatch","state":"COMPLETED","end":"2026-01-01T00:00:{i:02}Z","#,
                    r#""elapsed_s":1000,"timelimit_s":7200,"nnodes":3,"ntasks":12,"alloc_cpus":12,"req_mem_mb":98304,"max_rss_mb":{peak},"total_cpu_s":7000,"is_final":true}}"#,
                    "\n"
                ),
                i = i,
                peak = 2048 + i % 3,
            )
        })
        .collect();
    let h = write(dir.path(), "h.ndjson", &hist, false);
    let out = hpc_testkit::feed(
        TOOL.command(&["plan", &s, "--history", &h, "--format", "ndjson"])
            .env("USER", "ana"),
        b"",
    );
    assert!(out.status.success(), "{}", hpc_testkit::text(&out.stderr));
    let text = hpc_testkit::text(&out.stdout);
    let plan: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    let mem = plan["options"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|o| o.as_str()?.strip_prefix("--mem="))
        .unwrap_or_else(|| panic!("{plan}"))
        .to_string();
    let per_node = hpc_core::slurm::parse_mem(&mem, 1024.0 * 1024.0)
        .unwrap()
        .unwrap()
        .mb;
    assert!(
        per_node >= 4.0 * 2050.0,
        "{mem} a node for 4 tasks of 2 GiB"
    );
    let why = plan["changes"][0]["why"].as_str().unwrap();
    assert!(why.contains("x the tasks on a node (up to 4)"), "{why}");
}

#[test]
fn every_flag_in_the_help_is_in_the_man_page() {
    for sub in ["plan", "spool"] {
        TOOL.assert_help_in_man(&TOOL.help(&[sub]));
    }
}

#[test]
fn the_monitor_and_finalizer_run_with_the_tools_and_spool_of_the_submission() {
    // A job submitted with --export=NONE runs with its login PATH: the
    // tools the monitor and finalizer call by name, and the spool of the
    // submission, are given to them alone; the script's own PATH is kept.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("log");
    let wrap = wrap_with(
        d,
        "#!/bin/sh\necho \"job PATH=$PATH SPOOL=${HPC_SIZER_SPOOL-unset}\"\n",
        " PATH=$PATH SPOOL=${HPC_SIZER_SPOOL-unset}",
        &[
            "--tools-path",
            "/opt/hpc tools/bin:/usr/local/hpc",
            "--spool",
            "/var/spool/it's",
        ],
    );
    let out = Command::new("sh")
        .arg(&wrap)
        .env("SLURM_JOB_ID", "77")
        .env("PATH", "/usr/bin:/bin")
        .env_remove("HPC_SIZER_SPOOL")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        hpc_testkit::text(&out.stdout),
        "job PATH=/usr/bin:/bin SPOOL=unset\n"
    );
    let tools = "PATH=/opt/hpc tools/bin:/usr/local/hpc:/usr/bin:/bin SPOOL=/var/spool/it's";
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("monitor start {tools}\nmonitor stop {tools}\nfinalize 77 {tools}\n")
    );
    // A job's own spool (an admin's TaskProlog exports the site's) is kept:
    // the monitor then finds the probe the prolog started.
    std::fs::remove_file(&log).unwrap();
    let out = Command::new("sh")
        .arg(&wrap)
        .env("SLURM_JOB_ID", "77")
        .env("PATH", "/usr/bin:/bin")
        .env("HPC_SIZER_SPOOL", "/site/spool/ana")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        hpc_testkit::text(&out.stdout),
        "job PATH=/usr/bin:/bin SPOOL=/site/spool/ana\n"
    );
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.starts_with("monitor start PATH=/opt/hpc tools/bin:/usr/local/hpc:/usr/bin:/bin SPOOL=/site/spool/ana\n"), "{log}");
}
