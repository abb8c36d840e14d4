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
    let log = dir.join("log");
    let mon = write(
        dir,
        "mon",
        &format!("#!/bin/sh\necho \"monitor $1\" >>{}\n", log.display()),
        true,
    );
    let fin = write(
        dir,
        "fin",
        &format!("#!/bin/sh\necho \"finalize $1\" >>{}\n", log.display()),
        true,
    );
    let s = write(dir, "job.sbatch", script, false);
    let wrap = dir.join("wrapped.sbatch");
    let (code, _, err) = TOOL.cli(
        &[
            "plan",
            &s,
            "--no-recommend",
            "--wrap",
            wrap.to_str().unwrap(),
            "--monitor",
            &mon,
            "--finalize",
            &fin,
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let out = Command::new("sh")
        .arg(&wrap)
        .arg("arg one")
        .env("SLURM_JOB_ID", "77")
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        std::fs::read_to_string(&log).unwrap_or_default(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
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
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
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

#[test]
fn every_flag_in_the_help_is_in_the_man_page() {
    for sub in ["plan", "spool"] {
        TOOL.assert_help_in_man(&TOOL.help(&[sub]));
    }
}
