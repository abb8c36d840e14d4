//! hpc-ingest end to end: the real binary over real sacct text, into real
//! SQLite files.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use hpc_testkit::{feed, status_to, text, Tool};
use serde_json::Value;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-ingest"));

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sacct")
}

/// Runs hpc-ingest with `args`, feeding `stdin`, with HPC_SIZER_DB unset
/// and TZ=UTC.
fn ingest(args: &[&str], stdin: &[u8]) -> Output {
    ingest_in(Some("UTC"), args, stdin)
}

/// [`ingest`] with `TZ` set to `tz`, or unset.
fn ingest_in(tz: Option<&str>, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = TOOL.command(args);
    cmd.env_remove("HPC_SIZER_DB").env_remove("TZ");
    if let Some(tz) = tz {
        cmd.env("TZ", tz);
    }
    feed(&mut cmd, stdin)
}

/// A run's standard error as text.
fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

fn jobs_of(o: &Output) -> HashMap<String, Value> {
    assert!(o.status.success(), "hpc-ingest failed: {}", stderr(o));
    String::from_utf8(o.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["kind"], "job");
            (v["job_id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

fn num(j: &Value, k: &str) -> Option<f64> {
    j.get(k).and_then(Value::as_f64)
}

fn close(a: Option<f64>, b: f64, tol: f64, what: &str) {
    let a = a.unwrap_or_else(|| panic!("{what}: absent, expected {b}"));
    assert!((a - b).abs() <= tol, "{what}: {a} vs {b}");
}

/// The reportseff `.caret` column lists, by field count (see the fixture README).
fn caret_fields(n: usize) -> &'static str {
    match n {
        12 => "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,Timelimit,TotalCPU",
        11 => "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,TotalCPU",
        13 => "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,TRESUsageOutAve,Timelimit,TotalCPU",
        9 => "AdminComment,AllocCPUS,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State",
        10 => "AdminComment,AllocCPUS,JobID,JobIDRaw,MaxDiskReadNode,MaxRSS,NNodes,NTasks,ReqMem,State",
        _ => panic!("no caret layout with {n} columns"),
    }
}

fn slurm_header() -> String {
    std::fs::read_to_string(fixtures().join("slurm-22.05/sacct_real_header.txt"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn every_fixture_line_ingests_without_rejects() {
    let mut files = 0;
    for entry in std::fs::read_dir(fixtures().join("reportseff")).unwrap() {
        let p = entry.unwrap().path();
        let text = std::fs::read(&p).unwrap();
        let name = p.display().to_string();
        let out = match p.extension().and_then(|e| e.to_str()) {
            Some("psv") => ingest(&["--ndjson", "--utc"], &text),
            Some("caret") => {
                let first = String::from_utf8_lossy(&text)
                    .lines()
                    .next()
                    .unwrap()
                    .to_string();
                let n = first.split("^|^").count() - 1;
                ingest(
                    &[
                        "--ndjson",
                        "--delimiter",
                        "^|^",
                        "--fields",
                        caret_fields(n),
                    ],
                    &text,
                )
            }
            _ => continue,
        };
        files += 1;
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(" 0 rejected"),
            "{name}: {}",
            stderr(&out)
        );
        assert!(!jobs_of(&out).is_empty(), "{name} gave no jobs");
    }
    let header = slurm_header();
    for f in [
        "sacct_real_steps.txt",
        "sacct_real_X.txt",
        "sacct_real_linuxproc_steps.txt",
        "sacct_real_while_running.txt",
    ] {
        let text = std::fs::read(fixtures().join("slurm-22.05").join(f)).unwrap();
        let out = ingest(&["--ndjson", "--utc", "--fields", &header], &text);
        assert!(out.status.success(), "{f}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(" 0 rejected"),
            "{f}: {}",
            stderr(&out)
        );
        files += 1;
    }
    assert_eq!(files, 30);
}

/// Parses reportseff's table: job id -> (cpu eff, mem eff), `None` for '—'.
fn reportseff_expected() -> Vec<(String, Option<f64>, Option<f64>)> {
    let md =
        std::fs::read_to_string(fixtures().join("reportseff/combined_expected_by_reportseff.md"))
            .unwrap();
    md.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| job id"))
        .map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            let f = |s: &str| s.parse::<f64>().ok();
            (c[1].to_string(), f(c[8]), f(c[9]))
        })
        .collect()
}

#[test]
fn efficiencies_agree_with_reportseff_where_its_rules_hold() {
    let text = std::fs::read(fixtures().join("reportseff/combined_sacct_parsable2.psv")).unwrap();
    let jobs = jobs_of(&ingest(&["--ndjson"], &text));
    let expected = reportseff_expected();
    assert_eq!(expected.len(), 14);
    assert_eq!(jobs.len(), 14);
    for (id, cpu, mem) in expected {
        let j = &jobs[&id];
        match id.as_str() {
            // reportseff truncates TotalCPU to whole seconds: 1.608 s of CPU
            // becomes 1 s (6.2 %); we keep the milliseconds (10.05 %).
            "8205464" => close(num(j, "cpu_eff"), 100.0 * 1.608 / 16.0, 1e-3, "8205464 cpu"),
            // Same truncation on 417.815 s: 98.3 % there, 98.54 % here.
            "131042" => close(
                num(j, "cpu_eff"),
                100.0 * 417.815 / 424.0,
                1e-3,
                "131042 cpu",
            ),
            _ => match cpu {
                Some(c) => close(num(j, "cpu_eff"), c, 0.1, &format!("{id} cpu_eff")),
                None => assert!(
                    j.get("cpu_eff").is_none(),
                    "{id}: no CPU efficiency for a job that never ran"
                ),
            },
        }
        match (id.as_str(), mem) {
            // No step ever reported MaxRSS (23000233), or only 0, which is
            // no reading (8205464, a 2 s job): unknown, not 0 %.
            ("23000233" | "8205464", _) => assert!(j.get("mem_eff").is_none()),
            (_, Some(m)) => close(num(j, "mem_eff"), m, 0.1, &format!("{id} mem_eff")),
            (_, None) => unreachable!("reportseff gives a memory efficiency for every job here"),
        }
    }
}

#[test]
fn hand_checked_values_of_the_peer_jobs() {
    let text = std::fs::read(fixtures().join("reportseff/combined_sacct_parsable2.psv")).unwrap();
    let jobs = jobs_of(&ingest(&["--ndjson"], &text));
    // 24418435: 1Gn on one node, MaxRSS 499092K on .batch, TotalCPU 01:27:29.
    let j = &jobs["24418435"];
    assert_eq!(j["state"], "COMPLETED");
    close(num(j, "elapsed_s"), 5262.0, 0.0, "elapsed");
    close(num(j, "req_mem_mb"), 1024.0, 0.0, "req");
    close(num(j, "max_rss_mb"), 499092.0 / 1024.0, 1e-3, "maxrss");
    close(num(j, "total_cpu_s"), 5249.0, 0.0, "cpu");
    close(num(j, "cpu_hours_reserved"), 5262.0 / 3600.0, 1e-5, "cpu h");
    close(
        num(j, "cpu_hours_wasted"),
        13.0 / 3600.0,
        1e-5,
        "cpu h wasted",
    );
    // 23000233: 4000Mc x 16 CPUs, cancelled before it ran.
    let j = &jobs["23000233"];
    assert_eq!(j["state"], "CANCELLED");
    assert_eq!(j["cancelled_by"], 129319);
    close(num(j, "req_mem_mb"), 64000.0, 0.0, "Mc scaling");
    // 24220929_421: an array task whose raw id differs; MM:SS.mmm TotalCPU.
    let j = &jobs["24220929_421"];
    assert_eq!(j["job_id_raw"], "24221219");
    close(num(j, "total_cpu_s"), 568.052, 1e-9, "MM:SS.mmm");
    // 65638294: 36 srun steps, the largest MaxRSS is on step .22.
    let j = &jobs["65638294"];
    close(
        num(j, "max_rss_mb"),
        8074500.0 / 1024.0,
        1e-3,
        "maxrss over numbered steps",
    );
    close(
        num(j, "total_cpu_s"),
        4.0 * 86400.0 + 23.0 * 3600.0 + 56.0 * 60.0 + 21.0,
        0.0,
        "days",
    );
    assert_eq!(j["ntasks"], 2);
    // 6196869: 191846Mn on 20 nodes, three-digit days of CPU.
    let j = &jobs["6196869"];
    close(num(j, "req_mem_mb"), 191846.0 * 20.0, 0.0, "Mn scaling");
    close(
        num(j, "total_cpu_s"),
        451.0 * 86400.0 + 6.0 * 3600.0 + 24.0,
        0.0,
        "451 days",
    );
    assert!(j.get("timelimit_s").is_none(), "UNLIMITED has no seconds");
    // 25569410: no .batch step at all; MaxRSS from .0.
    let j = &jobs["25569410"];
    close(
        num(j, "max_rss_mb"),
        62328.0 / 1024.0,
        1e-3,
        "no batch step",
    );
    // 131042: 8 tasks on .0; memory efficiency uses MaxRSS x NTasks.
    let j = &jobs["131042"];
    close(
        num(j, "max_rss_mb"),
        1947276.0 / 1024.0,
        1e-3,
        "max_rss is per task",
    );
    close(
        num(j, "mem_eff"),
        100.0 * 8.0 * 1947276.0 / 1024.0 / 16000.0,
        1e-3,
        "x NTasks",
    );
    close(
        num(j, "mem_gb_hours_wasted"),
        (16000.0 - 8.0 * 1947276.0 / 1024.0) / 1024.0 * 53.0 / 3600.0,
        1e-5,
        "mem waste",
    );
    // 1234: TIMEOUT job line, CANCELLED .batch line.
    assert_eq!(jobs["1234"]["state"], "TIMEOUT");
}

#[test]
fn real_slurm_jobs_have_hand_checked_values() {
    let text = std::fs::read(fixtures().join("slurm-22.05/sacct_real_steps.txt")).unwrap();
    let header = slurm_header();
    let jobs = jobs_of(&ingest(&["--ndjson", "--utc", "--fields", &header], &text));
    assert_eq!(jobs.len(), 12);
    let j = &jobs["11"];
    assert_eq!(j["user"], "root");
    assert_eq!(j["start"], "2026-11-21T23:28:56Z");
    close(num(j, "max_rss_mb"), 322212.0 / 1024.0, 1e-3, "11 maxrss");
    close(num(j, "total_cpu_s"), 0.452, 1e-9, "11 cpu");
    close(
        num(j, "mem_eff"),
        100.0 * 322212.0 / 1024.0 / 1024.0,
        1e-3,
        "11 mem eff",
    );
    close(num(j, "cpu_eff"), 100.0 * 0.452 / 6.0, 1e-3, "11 cpu eff");
    assert_eq!(j["alloc_gpus"], 0);
    assert_eq!(jobs["12"]["state"], "OUT_OF_MEMORY");
    assert_eq!(jobs["12"]["exit_code"], "0:125");
    close(
        num(&jobs["13"], "max_rss_mb"),
        115840.0 / 1024.0,
        1e-3,
        "13 maxrss on step .1",
    );
    assert_eq!(jobs["13"]["alloc_cpus"], 2);
    let j = &jobs["19"];
    assert_eq!(j["state"], "CANCELLED");
    assert_eq!(j["cancelled_by"], 0);
    assert!(j["start"].is_null());
    assert!(j.get("node_list").is_none());
    assert!(j.get("cpu_eff").is_none());
    assert_eq!(jobs["14_3"]["job_id_raw"], "14");
    assert_eq!(jobs["18"]["state"], "TIMEOUT");
    close(
        num(&jobs["18"], "elapsed_s"),
        70.0,
        0.0,
        "18 elapsed from ElapsedRaw",
    );
    assert_eq!(jobs["16"]["user"], "alice");
}

#[test]
fn sacct_x_leaves_cpu_unknown_and_says_so() {
    let text = std::fs::read(fixtures().join("slurm-22.05/sacct_real_X.txt")).unwrap();
    let header = slurm_header();
    let out = ingest(&["--ndjson", "--fields", &header], &text);
    let jobs = jobs_of(&out);
    assert!(jobs["11"].get("total_cpu_s").is_none());
    assert!(jobs["11"].get("cpu_eff").is_none());
    assert!(jobs["11"].get("cpu_hours_reserved").is_some());
    assert!(stderr(&out).contains("sacct -X"), "{}", stderr(&out));
}

#[test]
fn bad_lines_are_reported_and_good_lines_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let text = "JobID|State|Elapsed|AllocCPUS|ReqMem|MaxRSS|TotalCPU\n\
                1|COMPLETED|00:01:00|1|1G||00:30.000\n\
                1.batch|COMPLETED|00:01:00|1||100M|00:30.000\n\
                2|COMPLETED|1-2x:00|1|1G||00:00:01\n\
                2.batch|COMPLETED|00:01:00|1||1M|00:00:01\n\
                3|COMPLETED|00:01:00|1|1G|extra|00:00:01|oops\n\
                4|COMPLETED|00:02:00|2|2G||00:01:00\n";
    let out = ingest(&["--db", db.to_str().unwrap()], text.as_bytes());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("line 4: Elapsed '1-2x:00': not a duration"),
        "{err}"
    );
    assert!(
        err.contains("line 5: step of the rejected job line 2"),
        "{err}"
    );
    assert!(err.contains("line 6: 8 fields, expected 7"), "{err}");
    assert!(err.contains("2 jobs"), "{err}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ids: Vec<String> = conn
        .prepare("SELECT job_id FROM jobs ORDER BY job_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids, vec!["1", "4"]);
}

/// sacct -P does not escape '|' in a value, so a job name can look like a
/// header line. It is not taken once data lines have come: before, a name
/// holding '|JobID|User|...' became the column map of the lines after it,
/// the next job's name (same width) was read as another user's record and
/// overwrote it, and every later line was rejected.
#[test]
fn a_header_inside_a_job_name_is_not_taken_after_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let text = "JobID|JobName|User|State|Cluster|Start|MaxRSS|ReqMem\n\
                777|real|bob|COMPLETED|mycl|1700000000|1G|2G\n\
                900|a|JobID|User|State|Cluster|Start|MaxRSS|ReqMem|mallory|COMPLETED|mycl|1700000050|1M|1G\n\
                901|b|777|bob|COMPLETED|mycl|1700000100|999G|1G|mallory|COMPLETED|mycl|1700000060|1M|1G\n\
                902|fine|carol|COMPLETED|mycl|1700000200|1G|2G\n\
                JobID|JobName|User|State|Cluster|Start|MaxRSS|ReqMem\n\
                903|after|dave|COMPLETED|mycl|1700000300|1G|2G\n";
    let out = ingest(&["--utc", "--db", db.to_str().unwrap()], text.as_bytes());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("line 3: a header after data lines"), "{err}");
    assert!(err.contains("line 4: 15 fields, expected 8"), "{err}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(String, String, f64)> = conn
        .prepare("SELECT job_id, user, max_rss_mb FROM jobs ORDER BY job_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let want = [("777", "bob"), ("902", "carol"), ("903", "dave")];
    assert_eq!(rows.len(), want.len(), "{rows:?}");
    for ((id, user, rss), (wid, wuser)) in rows.iter().zip(want) {
        assert_eq!((id.as_str(), user.as_str()), (wid, wuser), "{rows:?}");
        assert_eq!(*rss, 1024.0, "{rows:?}");
    }
    // A different header after data is refused, and said so; the lines
    // after it are read by the first header, so these fail as bad values.
    let text = "JobID|User|State\n1|bob|COMPLETED\nJobID|State|User\n2|COMPLETED|ann\n";
    let out = ingest(&["--ndjson"], text.as_bytes());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("line 3: a header after data lines"), "{err}");
    assert!(
        err.contains("line 4: State 'ann': not a job state"),
        "{err}"
    );
    let users: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["user"].clone())
        .collect();
    assert_eq!(users, ["bob"]);
}

#[test]
fn an_unterminated_last_line_is_read_like_any_other() {
    // Good without its newline: kept.
    let text = "JobID|State|Elapsed\n1|COMPLETED|00:01:00\n2|COMPLETED|00:02:00";
    let out = ingest(&["--ndjson"], text.as_bytes());
    assert_eq!(jobs_of(&out).len(), 2);
    // Bad without its newline: a rejected line, not a tolerated truncation.
    let text = "JobID|State|Elapsed\n1|COMPLETED|00:01:00\n2|COMPL";
    let out = ingest(&["--ndjson"], text.as_bytes());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("line 3: 2 fields"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("truncated"), "{}", stderr(&out));
    let out = ingest(&["--ndjson"], b"garbage");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 1: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("1 rejected"), "{}", stderr(&out));
    // Empty input is no job and no error.
    let out = ingest(&["--ndjson"], b"");
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

/// Local summer and winter times, Unix seconds and times with offsets.
const TIMES: &str = "JobID|State|Elapsed|Submit|Start|End\n\
    1|COMPLETED|00:01:00|2026-07-01T11:00:00|2026-07-01T12:00:00|2026-07-01T12:01:00\n\
    2|COMPLETED|00:01:00|2026-01-15T11:00:00|2026-01-15T12:00:00|2026-01-15T12:01:00\n\
    3|COMPLETED|00:01:00|1782907200|1782907200|Unknown\n\
    4|COMPLETED|00:01:00|2026-07-01T12:00:00Z|2026-07-01T12:00:00+02:00|2026-07-01T12:00:00-05:00\n";

/// (job id, submit, start, end) of each job, in job id order.
fn times(tz: Option<&str>, args: &[&str]) -> Vec<[String; 4]> {
    let mut args = args.to_vec();
    args.push("--ndjson");
    let out = ingest_in(tz, &args, TIMES.as_bytes());
    let text = |v: &Value| v.as_str().unwrap_or("null").to_string();
    let mut jobs: Vec<_> = jobs_of(&out)
        .into_iter()
        .map(|(id, j)| [id, text(&j["submit"]), text(&j["start"]), text(&j["end"])])
        .collect();
    jobs.sort();
    jobs
}

fn row(cells: [&str; 4]) -> [String; 4] {
    cells.map(str::to_string)
}

#[test]
fn local_times_take_the_offset_of_their_own_date() {
    let unambiguous = [
        row(["3", "2026-07-01T12:00:00Z", "2026-07-01T12:00:00Z", "null"]),
        row([
            "4",
            "2026-07-01T12:00:00Z",
            "2026-07-01T10:00:00Z",
            "2026-07-01T17:00:00Z",
        ]),
    ];
    // Summer is EDT (-4), winter EST (-5).
    let mut ny = vec![
        row([
            "1",
            "2026-07-01T15:00:00Z",
            "2026-07-01T16:00:00Z",
            "2026-07-01T16:01:00Z",
        ]),
        row([
            "2",
            "2026-01-15T16:00:00Z",
            "2026-01-15T17:00:00Z",
            "2026-01-15T17:01:00Z",
        ]),
    ];
    ny.extend(unambiguous.clone());
    assert_eq!(times(Some("America/New_York"), &[]), ny);
    assert_eq!(times(Some(":America/New_York"), &[]), ny);
    // --utc reads local times as UTC, whatever TZ says.
    let mut utc = vec![
        row([
            "1",
            "2026-07-01T11:00:00Z",
            "2026-07-01T12:00:00Z",
            "2026-07-01T12:01:00Z",
        ]),
        row([
            "2",
            "2026-01-15T11:00:00Z",
            "2026-01-15T12:00:00Z",
            "2026-01-15T12:01:00Z",
        ]),
    ];
    utc.extend(unambiguous);
    assert_eq!(times(Some("America/New_York"), &["--utc"]), utc);
    assert_eq!(times(Some("UTC"), &[]), utc);
}

#[test]
fn a_tz_that_names_no_zone_is_a_usage_error() {
    let out = ingest_in(Some("No/Such_Zone"), &["--ndjson"], TIMES.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("TZ='No/Such_Zone'"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
    // With --utc the zone is not needed.
    let out = ingest_in(
        Some("No/Such_Zone"),
        &["--ndjson", "--utc"],
        TIMES.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

fn count(db: &Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT count(*), coalesce(sum(is_final), 0) FROM jobs",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

#[test]
fn reingest_is_idempotent_and_final_states_win() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let dbs = db.to_str().unwrap();
    let header = slurm_header();
    let running =
        std::fs::read(fixtures().join("slurm-22.05/sacct_real_while_running.txt")).unwrap();
    let done = std::fs::read(fixtures().join("slurm-22.05/sacct_real_steps.txt")).unwrap();
    assert!(ingest(&["--db", dbs, "--fields", &header], &running)
        .status
        .success());
    assert_eq!(count(&db), (3, 1));
    assert!(ingest(&["--db", dbs, "--fields", &header], &done)
        .status
        .success());
    assert_eq!(count(&db), (12, 12));
    let dump = |db: &Path| -> Vec<(String, String, Option<f64>)> {
        let conn = rusqlite::Connection::open(db).unwrap();
        let mut st = conn
            .prepare("SELECT job_id, state, max_rss_mb FROM jobs ORDER BY job_id")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let before = dump(&db);
    // Stale RUNNING data arrives again, and the final data twice.
    let out = ingest(&["--db", dbs, "--fields", &header], &running);
    assert!(
        stderr(&out).contains("2 final records kept"),
        "{}",
        stderr(&out)
    );
    assert!(ingest(&["--db", dbs, "--fields", &header], &done)
        .status
        .success());
    assert_eq!(dump(&db), before);
    assert_eq!(count(&db), (12, 12));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn help_matches_the_man_page() {
    let help = TOOL.help(&[]);
    assert!(TOOL.assert_help_in_man(&help).len() >= 9, "{help}");
}

#[test]
fn sacct_format_lists_the_fields() {
    let out = TOOL.command(&["--sacct-format"]).output().unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.starts_with("Cluster,JobID,JobIDRaw,"), "{s}");
    assert!(s.contains("MaxRSS") && s.contains("TotalCPU") && s.contains("AllocTRES"));
}

#[test]
fn closed_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let mut f = std::fs::File::create(&input).unwrap();
    hpc_testkit::sacct_gen::write_sacct(&mut f, 20_000, 1, 3).unwrap();
    drop(f);
    let first = TOOL.closed_pipe(&["--ndjson", input.to_str().unwrap()], drop);
    assert!(first.starts_with("{\"kind\":\"job\""), "{first}");
}

fn write_generated(path: &Path, jobs: u64, first: u64) -> u64 {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    hpc_testkit::sacct_gen::write_sacct(&mut f, jobs, first, first + 1).unwrap();
    f.flush().unwrap();
    jobs
}

#[test]
fn kill_9_at_random_points_leaves_a_valid_database() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.txt");
    let jobs = write_generated(&input, 150_000, 5_000_000);
    let db = dir.path().join("h.db");
    let mut rng = hpc_testkit::sacct_gen::Rng::new(99);
    for round in 0..10 {
        let mut child = TOOL
            .command(&[
                "--db",
                db.to_str().unwrap(),
                "--batch",
                "5000",
                input.to_str().unwrap(),
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20 + rng.below(400)));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let conn = rusqlite::Connection::open(&db).unwrap();
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "round {round}");
    }
    let out = TOOL
        .command(&["--db", db.to_str().unwrap(), input.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count(&db).0, jobs as i64);
}

#[test]
fn sixteen_concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut inputs = Vec::new();
    for i in 0..16u64 {
        let p = dir.path().join(format!("in{i}.txt"));
        // Overlapping id ranges: writer i shares half its jobs with writer i+1.
        write_generated(&p, 2_000, 100_000 + i * 1_000);
        inputs.push(p);
    }
    let children: Vec<_> = inputs
        .iter()
        .map(|p| {
            TOOL.command(&[
                "--db",
                db.to_str().unwrap(),
                "--batch",
                "500",
                p.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    // Ids run from 100_001 to 100_000 + 15_000 + 2_000. The jobs two writers
    // share were generated independently (other starts), so the store keeps
    // them as separate runs of one job: count the jobs, not the runs.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ids: i64 = conn
        .query_row("SELECT count(DISTINCT job_id_raw) FROM jobs", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(ids, 17_000);
}

#[test]
fn a_line_over_16_mib_is_rejected_and_the_next_lines_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("long.txt");
    let mut text = b"JobID|State|Elapsed\n1|COMPLETED|00:01:00\n2|".to_vec();
    text.resize(text.len() + (16 << 20) + 10, b'x');
    text.extend_from_slice(b"\n3|COMPLETED|00:03:00\n");
    std::fs::write(&input, &text).unwrap();
    let out = ingest(&["--ndjson", input.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("long.txt: line 3: line longer than 16777216 bytes: skipped"),
        "{err}"
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = lines.iter().filter_map(|j| j["job_id"].as_str()).collect();
    assert_eq!(ids, ["1", "3"]);
}

/// Runs the binary with stdin from `input`, stdout to `stdout` and stderr
/// to `stderr` (`/dev/full` for a stream that cannot be written).
fn run_to(args: &[&str], input: &Path, stdout: &str, stderr: &str) -> Option<i32> {
    let mut cmd = TOOL.command(args);
    cmd.env("TZ", "UTC").env_remove("HPC_SIZER_DB");
    status_to(
        &mut cmd,
        std::fs::File::open(input).unwrap(),
        stdout,
        stderr,
    )
}

#[test]
fn a_stderr_that_cannot_be_written_changes_no_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.txt");
    std::fs::write(&good, "JobID|State|Elapsed\n1|COMPLETED|00:01:00\n").unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "JobID|State|Elapsed\n1|COMPLETED|00:01:00\n2|x\n").unwrap();
    let db = dir.path().join("h.db");
    let dbs = db.to_str().unwrap();
    let code = |args: &[&str], input: &Path| run_to(args, input, "/dev/null", "/dev/full");
    assert_eq!(code(&["--ndjson"], &good), Some(0));
    assert_eq!(code(&["--db", dbs], &good), Some(0));
    assert_eq!(count(&db), (1, 1));
    assert_eq!(code(&["--ndjson"], &bad), Some(1));
    assert_eq!(code(&["--ndjson", "--nope"], &good), Some(2));
}

#[test]
fn help_that_cannot_be_written_fails() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let st = run_to(&["--help"], &empty, "/dev/full", "/dev/null");
    assert_eq!(st, Some(1));
    let st = run_to(&["--help"], &empty, "/dev/null", "/dev/null");
    assert_eq!(st, Some(0));
}

#[test]
fn a_bar_in_a_name_before_an_empty_last_value_is_rejected_not_shifted() {
    // --parsable2 (no delimiter at the ends of lines): job 700 is named
    // 'a|b' and has no account. The one extra field was taken for
    // --parsable's trailing delimiter, line by line, and the job stored as
    // name 'a', partition 'b', account 'gpu' (exit 0).
    let out = ingest(
        &["--ndjson"],
        b"JobID|JobIDRaw|State|Elapsed|AllocCPUS|JobName|Partition|Account\n\
699|699|COMPLETED|01:00:00|2|ok|gpu|physics\n\
700|700|COMPLETED|01:00:00|2|a|b|gpu|\n",
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("line 3: 9 fields, expected 8"),
        "{}",
        stderr(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"job_id\":\"699\""), "{stdout}");
    assert!(!stdout.contains("\"job_id\":\"700\""), "{stdout}");
    // --parsable, which ends every line with the delimiter, header too.
    let out = ingest(
        &["--ndjson"],
        b"JobID|State|Elapsed|Account|\n701|COMPLETED|01:00:00||\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"job_id\":\"701\""));
}

#[test]
fn values_quoted_in_messages_are_escaped() {
    // Whatever sacct printed (a job name, any field a user sets) and a
    // JSON string's newline reach the terminal escaped: no escape code
    // runs, no line is forged.
    let out = ingest(
        &["--ndjson"],
        b"JobID|State|Elapsed\n1|COMPLETED|\x1b]0;pwn\x07\x1b[2J\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("Elapsed '\\u{1b}]0;pwn\\u{7}\\u{1b}[2J'"),
        "{err}"
    );
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err}");
    // The unit separator harvest reads sacct with, named in a message.
    let out = ingest(
        &["--ndjson", "--delimiter", "\x1f"],
        b"JobID\x1fState\n1\x1fCOMPLETED\x1fextra\n",
    );
    let err = stderr(&out);
    assert!(err.contains("a '\\u{1f}' inside a value"), "{err}");
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err}");
}

#[test]
fn file_names_in_messages_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("in\n\x1b[31m.txt");
    let name = odd.to_str().unwrap();
    let out = ingest(&["--ndjson", name], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("in\\n\\u{1b}[31m.txt"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains('\x1b'), "{}", stderr(&out));
    std::fs::write(&odd, "JobID|State|Elapsed\n1|COMPLETED|x\n").unwrap();
    let out = ingest(&["--ndjson", name], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("in\\n\\u{1b}[31m.txt: line 2: Elapsed"),
        "{}",
        stderr(&out)
    );
    let db = dir.path().join("h\x1b.db");
    let out = ingest(
        &["--db", db.to_str().unwrap()],
        b"JobID|State\n1|COMPLETED\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("into "), "{}", stderr(&out));
    assert!(!stderr(&out).contains('\x1b'), "{}", stderr(&out));
}

#[test]
fn a_running_jobs_usage_is_unknown_not_zero() {
    // SLURM fills in TotalCPU and MaxRSS as steps end: while job 18 runs
    // sacct shows TotalCPU 00:00:00, which read as 0 % CPU (and flags).
    let text = std::fs::read(fixtures().join("slurm-22.05/sacct_real_while_running.txt")).unwrap();
    let out = ingest(&["--ndjson", "--fields", &slurm_header()], &text);
    let jobs = jobs_of(&out);
    let running = &jobs["18"];
    assert_eq!(running["is_final"], false);
    for k in [
        "total_cpu_s",
        "cpu_eff",
        "cpu_hours_wasted",
        "mem_eff",
        "mem_gb_hours_wasted",
    ] {
        assert!(running.get(k).is_none(), "{k} of a running job: {running}");
    }
    assert!(num(running, "cpu_hours_reserved").is_some(), "{running}");
    // A finished step's MaxRSS 0 is no reading; a missing TotalCPU or
    // Elapsed column leaves out what needs it.
    let fields = "JobID|JobIDRaw|State|AllocCPUS|ReqMem|MaxRSS|NTasks";
    let lines = "7|7|COMPLETED|4|4G||\n7.batch|7.batch|COMPLETED|4||0|1\n";
    let out = ingest(&["--ndjson", "--fields", fields], lines.as_bytes());
    let job = &jobs_of(&out)["7"];
    for k in [
        "max_rss_mb",
        "mem_eff",
        "total_cpu_s",
        "cpu_eff",
        "cpu_hours_reserved",
        "mem_gb_hours_reserved",
    ] {
        assert!(job.get(k).is_none(), "{k}: {job}");
    }
}

#[test]
fn a_headerless_first_job_named_jobid_is_a_job() {
    // Without a header the first line was taken for one when any field read
    // `jobid` (here the job name): the job was lost without a word.
    let text = "c1|1100|1100|bob|grp|acct|part|jobid|COMPLETED|0:0|2026-11-21T10:00:00|2026-11-21T10:00:00|2026-11-21T11:00:00|01:00:00|3600|02:00:00|4|billing=4,cpu=4,mem=8G,node=1|1||n01|8G||03:00:00||\n\
                c1|1100.batch|1100.batch||||||COMPLETED|0:0|2026-11-21T10:00:00|2026-11-21T10:00:00|2026-11-21T11:00:00|01:00:00|3600||4|cpu=4,mem=8G,node=1|1|1|n01||4G|03:00:00||\n";
    let out = ingest(&["--ndjson"], text.as_bytes());
    let jobs = jobs_of(&out);
    assert_eq!(jobs["1100"]["job_name"], "jobid", "{}", stderr(&out));
    close(
        num(&jobs["1100"], "max_rss_mb"),
        4096.0,
        1e-9,
        "1100 max_rss_mb",
    );
}

#[test]
fn an_earlier_run_of_a_requeued_job_is_over() {
    // sacct -D: the first run REQUEUED with its end, then the run that
    // completed. The first stayed 'running or pending' for ever.
    let text = "JobID|JobIDRaw|State|Start|End|ElapsedRaw|AllocCPUS|ReqMem|MaxRSS|TotalCPU\n\
                700|700|REQUEUED|2026-11-21T10:00:00|2026-11-21T11:00:00|3600|8|8G||07:50:00\n\
                700.batch|700.batch|CANCELLED|2026-11-21T10:00:00|2026-11-21T11:00:00|3600|8||7000M|07:50:00\n\
                700|700|COMPLETED|2026-11-21T11:05:00|2026-11-21T11:35:00|1800|8|8G||00:01:00\n\
                700.batch|700.batch|COMPLETED|2026-11-21T11:05:00|2026-11-21T11:35:00|1800|8||500M|00:01:00\n\
                701|701|REQUEUED|2026-11-21T10:00:00|Unknown|3600|8|8G||00:00:00\n";
    let out = ingest(&["--ndjson"], text.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let finals: Vec<(String, bool)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["state"].as_str().unwrap().to_string(),
                v["is_final"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        finals,
        [
            ("REQUEUED".to_string(), true),
            ("COMPLETED".to_string(), true),
            ("REQUEUED".to_string(), false)
        ]
    );
}
