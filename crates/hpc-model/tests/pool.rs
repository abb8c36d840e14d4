//! `hpc-model pool` end to end on recorded sacctmgr, scontrol and squeue
//! outputs (tests/fixtures/pool), and on stand-in SLURM commands that fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hpc_testkit::{feed, long_flags, man_documents_flag, show, text, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));
const GPU_JOB: &str = "cpus=8,mem=180G,gpus=1";
const CPU_JOB: &str = "cpus=8,mem=48G";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pool")
}

/// `hpc-model pool --user USER` on the recorded outputs with that queue,
/// run in the fixtures folder.
fn pool_command(user: &str, queue: &str, args: &[&str]) -> Command {
    let mut c = TOOL.command(&["pool", "--user", user]);
    c.current_dir(fixtures())
        .args(["--assoc", "assoc.txt", "--qos", "qos.txt"])
        .args(["--partitions", "partitions.txt", "--usage", queue])
        .args(args);
    c
}

/// Runs `hpc-model pool` for ana on the recorded outputs with that queue.
fn pool(queue: &str, args: &[&str], stdin: &[u8]) -> Output {
    feed(&mut pool_command("ana", queue, args), stdin)
}

fn records(out: &Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", show(out));
    hpc_testkit::records(&text(&out.stdout))
}

/// The worked example of issue 12: two accounts whose QOS GrpTRES are
/// cpu=104,mem=812G,gres/gpu=3 and cpu=80,mem=625G,gres/gpu=2.
fn worked_example(rule: &str) -> Vec<Value> {
    let args = [
        "--gpu-job",
        GPU_JOB,
        "--cpu-job",
        CPU_JOB,
        "--block",
        "lab-cpu",
        "--rule",
        rule,
        "--format",
        "ndjson",
    ];
    records(&pool("queue-empty.txt", &args, b""))
}

#[test]
fn the_cpu_only_rule_gives_24_in_the_worked_example() {
    let r = worked_example("cpu-only");
    assert_eq!(r.len(), 3);
    assert_eq!(
        (r[0]["gpu_slots"].as_u64(), r[0]["cpu_slots"].as_u64()),
        (Some(3), Some(11))
    );
    assert_eq!(
        (r[1]["gpu_slots"].as_u64(), r[1]["cpu_slots"].as_u64()),
        (Some(2), Some(8))
    );
    assert_eq!(r[2]["kind"], "pool_total");
    assert_eq!(r[2]["jobs"], 24);
    assert_eq!(r[2]["bounded_jobs"], 15);
}

#[test]
fn the_bounded_rule_gives_fewer_and_names_memory_on_the_first_account() {
    let r = worked_example("bounded");
    assert_eq!(r[0]["kind"], "pool");
    assert_eq!(r[0]["account"], "lab-a");
    assert_eq!(r[0]["qos"], "lab-qa");
    assert_eq!(r[0]["partition"], "batch");
    assert_eq!(r[0]["limits"]["mem_mb"], 812.0 * 1024.0);
    assert_eq!(r[0]["limit_from"]["mem_mb"], "qos lab-qa GrpTRES");
    assert_eq!(r[0]["used"]["cpu"].to_string(), "0.0", "nothing queued");
    assert_eq!(
        (r[0]["gpu_slots"].as_u64(), r[0]["cpu_slots"].as_u64()),
        (Some(3), Some(5))
    );
    assert_eq!(r[0]["binding"], "mem");
    assert_eq!(r[0]["free_cpu_slots"], 5);
    assert_eq!(r[1]["account"], "lab-c");
    assert_eq!(r[1]["qos"], "lab-qc", "the default QOS of the association");
    let t = &r[2];
    assert_eq!(
        (t["jobs"].as_u64(), t["cpu_only_jobs"].as_u64()),
        (Some(15), Some(24))
    );
    assert_eq!(t["free_jobs"], 15);
}

#[test]
fn burst_and_blocked_accounts_are_skipped_unless_asked() {
    let r = worked_example("bounded");
    let accounts: Vec<&str> = r[..2]
        .iter()
        .map(|p| p["account"].as_str().unwrap())
        .collect();
    assert_eq!(accounts, ["lab-a", "lab-c"]);
    let skipped = r[2]["skipped"].to_string();
    assert_eq!(
        skipped,
        r#"[{"account":"lab-a-b","why":"burst"},{"account":"lab-cpu","why":"blocked"}]"#
    );
    let args = [
        "--cpu-job",
        CPU_JOB,
        "--burst",
        "--block",
        "lab-a,lab-c",
        "--format",
        "ndjson",
    ];
    let r = records(&pool("queue-empty.txt", &args, b""));
    let accounts: Vec<&str> = r.iter().filter_map(|p| p["account"].as_str()).collect();
    assert_eq!(accounts, ["lab-a-b", "lab-cpu"]);
}

#[test]
fn an_account_with_no_gpu_limit_gives_only_cpu_slots() {
    let args = [
        "--gpu-job",
        GPU_JOB,
        "--cpu-job",
        CPU_JOB,
        "--account",
        "lab-cpu",
        "--format",
        "ndjson",
    ];
    let r = records(&pool("queue-empty.txt", &args, b""));
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["gpu_slots"], 0);
    // floor(0.85 x 32 / 8) = 3; memory would allow 256 / 48 = 5.
    assert_eq!(r[0]["cpu_slots"], 3);
    assert_eq!(r[0]["binding"], "cpu");
    assert!(r[0]["limits"].get("gpus").is_none());
}

#[test]
fn the_text_table_shows_limits_slots_and_both_totals() {
    let args = [
        "--gpu-job",
        GPU_JOB,
        "--cpu-job",
        CPU_JOB,
        "--block",
        "lab-cpu",
    ];
    let out = pool("queue-lab-a-full.txt", &args, b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let row = t.lines().find(|l| l.starts_with("lab-a ")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "lab-a",
            "batch",
            "lab-qa",
            "cpu=104,mem=812G,gpu=3",
            "cpu=64,mem=780G,gpu=3",
            "3",
            "5",
            "0",
            "0",
            "mem",
            "(qos",
            "lab-qa",
            "GrpTRES)"
        ]
    );
    assert!(
        t.contains("total (bounded): 15 jobs at once (5 GPU + 10 CPU), 7 free now (2 GPU + 5 CPU)"),
        "{t}"
    );
    assert!(
        t.contains("with the memory bound: 15 jobs; without it (cpu-only rule): 24 jobs"),
        "{t}"
    );
    assert!(
        t.contains("skipped: lab-a-b (burst)\nskipped: lab-cpu (blocked)\n"),
        "{t}"
    );
}

#[test]
fn next_names_the_most_free_account_ties_by_order() {
    let args = [
        "--gpu-job",
        GPU_JOB,
        "--cpu-job",
        CPU_JOB,
        "--block",
        "lab-cpu",
        "--next",
        "cpu",
        "--format",
        "sbatch",
        "--time",
        "2:00:00",
    ];
    // Both have 5 CPU slots free: the first listed.
    let out = pool("queue-empty.txt", &args, b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "--account=lab-a --partition=batch --qos=lab-qa --time=10:00:00\n"
    );
    // lab-a full (anyone's jobs, pending ones too): lab-c.
    let out = pool("queue-lab-a-full.txt", &args, b"");
    assert_eq!(
        text(&out.stdout),
        "--account=lab-c --partition=batch --qos=lab-qc --time=10:00:00\n"
    );
    // --account gives the order.
    let mut reordered = args.to_vec();
    reordered.extend(["--account", "lab-c", "--account", "lab-a"]);
    let out = pool("queue-empty.txt", &reordered, b"");
    assert!(
        text(&out.stdout).starts_with("--account=lab-c "),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn next_with_none_free_exits_3_and_names_the_binding_limits() {
    let args = [
        "--gpu-job",
        GPU_JOB,
        "--cpu-job",
        CPU_JOB,
        "--block",
        "lab-cpu",
        "--next",
        "cpu",
        "--format",
        "sbatch",
    ];
    let out = pool("queue-all-full.txt", &args, b"");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "hpc-model pool: no account has a free cpu slot now: \
         lab-a: mem (qos lab-qa GrpTRES: 780G used of 812G); \
         lab-c: mem (qos lab-qc GrpTRES: 600G used of 625G)\n"
    );
}

#[test]
fn shapes_and_time_come_from_a_rec_record_on_stdin() {
    let rec = std::fs::read(fixtures().join("rec.ndjson")).unwrap();
    let args = [
        "--from", "-", "--block", "lab-cpu", "--next", "gpu", "--format", "sbatch",
    ];
    let out = pool("queue-empty.txt", &args, &rec);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The GPU job keeps its time; 8 CPUs + 48G + 1 GPU each.
    assert_eq!(
        text(&out.stdout),
        "--account=lab-a --partition=batch --qos=lab-qa --time=02:00:00\n"
    );
    let args = [
        "--from",
        "rec.ndjson",
        "--block",
        "lab-cpu",
        "--format",
        "ndjson",
    ];
    let r = records(&pool("queue-empty.txt", &args, b""));
    // lab-a: 3 GPU jobs take 24 CPUs and 144G; (88.4 - 24) / 8 = 8 CPU jobs.
    assert_eq!(
        (r[0]["gpu_slots"].as_u64(), r[0]["cpu_slots"].as_u64()),
        (Some(3), Some(8))
    );
    assert_eq!(r[0]["binding"], "cpu");
}

#[test]
fn bad_flags_are_usage_errors_and_bad_lines_are_named() {
    for (args, says) in [
        (&["--cpu-job", "cpus=8"][..], "needs cpus= and mem="),
        (&["--gpu-job", CPU_JOB][..], "a GPU job needs gpus="),
        (
            &["--cpu-job", CPU_JOB, "--headroom", "1.5"][..],
            "not in (0, 1]",
        ),
        (
            &["--cpu-job", CPU_JOB, "--format", "sbatch"][..],
            "needs --next",
        ),
        (
            &["--cpu-job", CPU_JOB, "--next", "gpu"][..],
            "--next gpu needs a GPU job",
        ),
        (&[][..], "give --gpu-job, --cpu-job or --from"),
        // Memory per CPU (or node), and a key twice, were taken quietly:
        // 48Gc sized as 48G, the last mem= winning.
        (
            &["--cpu-job", "cpus=8,mem=48Gc"][..],
            "mem: '48Gc' is not a size",
        ),
        (
            &["--cpu-job", "cpus=8,mem=48G,mem=1G"][..],
            "'mem' given twice",
        ),
    ] {
        let out = pool("queue-empty.txt", args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("queue.txt");
    std::fs::write(&bad, "lab-a|ana|batch|lab-qa|R|cpu=8\nlab-a|ana|batch\n").unwrap();
    let out = pool(bad.to_str().unwrap(), &["--cpu-job", CPU_JOB], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).ends_with("queue.txt: line 2: 3 fields, expected 6\n"),
        "{}",
        text(&out.stderr)
    );
}

/// `hpc-model pool` with no recorded files, with PATH holding only `dir`.
fn live(dir: &Path) -> Output {
    TOOL.command(&["pool", "--user", "ana", "--cpu-job", CPU_JOB])
        .env("PATH", dir)
        .output()
        .unwrap()
}

#[test]
fn a_missing_or_failing_slurm_command_is_an_error_not_an_empty_pool() {
    let dir = tempfile::tempdir().unwrap();
    let out = live(dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("hpc-model: cannot run `sacctmgr show associations"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    let fake = dir.path().join("sacctmgr");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'sacctmgr: error: Problem talking to the database' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = live(dir.path());
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("failed (exit status: 1): sacctmgr: error: Problem talking"),
        "{err}"
    );
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn a_user_without_associations_is_an_error() {
    let out = pool_command("zed", "queue-empty.txt", &["--cpu-job", CPU_JOB])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "hpc-model: user zed has no association\n"
    );
}

#[test]
fn help_matches_the_man_page() {
    let man = TOOL.man_page();
    let pool_section = man.split(".SH POOL").nth(1).expect("a POOL section");
    let help = TOOL.help(&["pool"]);
    TOOL.assert_help_in_man(&help);
    let mut flags = long_flags(&help);
    flags.retain(|f| f != "help");
    for f in &flags {
        assert!(
            man_documents_flag(pool_section, f),
            "man page POOL lacks --{f}"
        );
    }
    flags.sort();
    flags.dedup();
    assert!(flags.len() >= 17, "{} flags", flags.len());
    for cmd in [
        "sacctmgr show associations format=account,user,partition,qos,defaultqos,parentname,grptres \\-n \\-P",
        "sacctmgr show qos format=name,grptres,maxtrespu \\-n \\-P",
        "scontrol show partition \\-o",
        // -r: a pending array's tasks one a line (folded, they counted as
        // one job).
        "squeue \\-h \\-a \\-r \\-t RUNNING,PENDING \\-O",
    ] {
        assert!(pool_section.contains(cmd), "man page POOL lacks the command {cmd}");
    }
    let synopsis = man.split(".SH DESCRIPTION").next().unwrap();
    assert!(synopsis.contains(".B hpc-model pool"), "SYNOPSIS line");
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    // Closed before the tool writes: its output is too short for
    // Tool::closed_pipe, which reads a line first, to reach a closed pipe.
    let mut child = pool_command("ana", "queue-empty.txt", &["--cpu-job", CPU_JOB, "--burst"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), "");
}
