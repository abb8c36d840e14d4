//! hpc-store end to end on real SQLite files.

use std::path::Path;
use std::process::Output;

use hpc_testkit::{feed, text, Tool};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-store"));

fn store(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    feed(TOOL.command(&[]).arg("--db").arg(db).args(args), stdin)
}

const JOBS: &str = r#"{"kind":"job","cluster":"c","job_id":"1","job_id_raw":"1","user":"alice","partition":"cpu","state":"COMPLETED","submit":"2026-01-01T00:00:00Z","start":"2026-01-01T00:01:00Z","end":"2026-01-01T01:00:00Z","elapsed_s":3540.0,"alloc_cpus":4,"max_rss_mb":100.0,"is_final":true}
{"kind":"job","cluster":"c","job_id":"2","job_id_raw":"2","user":"bob","partition":"gpu","state":"RUNNING","submit":"2026-02-01T00:00:00Z","start":"2026-02-01T00:01:00Z","end":null,"is_final":false}
{"kind":"job","cluster":"c","job_id":"3","job_id_raw":"3","user":"alice","partition":"cpu","state":"FAILED","submit":"2026-03-01T00:00:00Z","start":"2026-03-01T00:00:00Z","end":"2026-03-02T00:00:00Z","is_final":true}
{"kind":"flag","job_id":"1","flag":"mem_overrequest","category":"misuse","value":0.1,"threshold":0.25,"reason":"peak 100 MiB of 1000 MiB requested"}
{"kind":"summary","job_id":"1","peak_rss_mb":100.0,"not_evaluated":["high_cpi"]}
"#;

#[test]
fn put_then_dump_round_trips_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = store(&db, &["put"], JOBS.as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("3 jobs, 2 other records"),
        "{}",
        text(&out.stderr)
    );
    let out = store(&db, &["dump", "--kind", "job,flag,summary"], b"");
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    let original: Vec<serde_json::Value> = JOBS
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every field put comes back as it was; a job record with its elapsed
    // time and CPUs but no reserved hours gets them as hpc-ingest derives
    // them (reports summed such jobs as 0 CPU-hours).
    for o in &original {
        let back = lines.iter().find(|l| {
            l["kind"] == o["kind"] && l["job_id"] == o["job_id"] && l.get("flag") == o.get("flag")
        });
        let back = back.unwrap_or_else(|| panic!("lost: {o}"));
        for (k, v) in o.as_object().unwrap() {
            assert_eq!(&back[k], v, "{k} changed: {o} -> {back}");
        }
    }
    let job1 = lines
        .iter()
        .find(|l| l["kind"] == "job" && l["job_id"] == "1")
        .unwrap();
    assert_eq!(
        job1["cpu_hours_reserved"], 3.933333,
        "4 CPUs x 3540 s: {job1}"
    );
    let job2 = lines
        .iter()
        .find(|l| l["kind"] == "job" && l["job_id"] == "2")
        .unwrap();
    assert!(
        job2.get("cpu_hours_reserved").is_none(),
        "no elapsed time, nothing derived: {job2}"
    );
    // Again: nothing changes.
    assert!(store(&db, &["put"], JOBS.as_bytes()).status.success());
    let again = store(&db, &["dump", "--kind", "job,flag,summary"], b"");
    assert_eq!(again.stdout, out.stdout);
}

#[test]
fn dump_filters_by_user_and_date() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    assert!(store(&db, &["put"], JOBS.as_bytes()).status.success());
    let ids = |args: &[&str]| -> Vec<String> {
        let o = store(&db, args, b"");
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["job_id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(ids(&["dump", "--user", "alice"]), vec!["1", "3"]);
    assert_eq!(ids(&["dump", "--since", "2026-02-15"]), vec!["3"]);
    assert_eq!(ids(&["dump", "--until", "2026-02-15"]), vec!["1", "2"]);
    assert_eq!(ids(&["dump", "--partition", "gpu"]), vec!["2"]);
    assert_eq!(
        ids(&["dump", "--kind", "flag", "--user", "bob"]),
        Vec::<String>::new()
    );
    let bad = store(&db, &["dump", "--since", "yesterday"], b"");
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("not a date"));
    let bad = store(&db, &["dump", "--kind", "nope"], b"");
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bad_records_are_reported_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let input = format!("{}not json\n{{\"kind\":\"flag\",\"job_id\":\"9\"}}\n", JOBS);
    let out = store(&db, &["put"], input.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("line 6: not a JSON object"), "{err}");
    assert!(err.contains("line 7: missing field"), "{err}");
    let all = store(&db, &["dump", "--kind", "job"], b"");
    assert_eq!(text(&all.stdout).lines().count(), 3, "good lines are kept");
}

#[test]
fn spool_files_are_loaded_once_and_moved() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let spool = dir.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    std::fs::write(spool.join("1.ndjson"), JOBS).unwrap();
    std::fs::write(spool.join("2.ndjson"), "{\"kind\":\"job\"}\n").unwrap();
    std::fs::write(spool.join(".3.ndjson.tmp"), "partial").unwrap();
    std::fs::write(spool.join(".4.ndjson"), "being written").unwrap();
    let out = store(&db, &["put", "--spool", spool.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(1), "one file had a bad line");
    assert!(
        text(&out.stderr).contains("2.ndjson: line 1"),
        "{}",
        text(&out.stderr)
    );
    assert!(spool.join("done/1.ndjson").exists());
    assert!(spool.join("rejected/2.ndjson").exists());
    assert!(
        spool.join(".4.ndjson").exists(),
        "dot files are still being written"
    );
    let out = store(&db, &["put", "--spool", spool.to_str().unwrap()], b"");
    assert!(out.status.success());
    assert!(text(&out.stderr).contains("in 0 spool files"));
    let st = store(&db, &["status"], b"");
    let s = text(&st.stdout);
    assert!(s.contains("jobs: 3 (2 final, 1 running or pending)"), "{s}");
    assert!(s.contains("MaxRSS coverage: 1 of 2"), "{s}");
    assert!(s.contains("flags: 1"), "{s}");
    assert!(
        s.contains("date range: 2026-01-01T00:00:00Z .. 2026-03-02T00:00:00Z"),
        "{s}"
    );
}

#[test]
fn status_shows_the_last_ingest_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    assert!(store(&db, &["put"], JOBS.as_bytes()).status.success());
    let s = text(&store(&db, &["status"], b"").stdout);
    assert!(s.contains("\nlast ingest: never\n"), "{s}");
    // The mark hpc-ingest sets after a run.
    hpc_db::Store::open(&db)
        .unwrap()
        .set_mark("last_ingest", "2 jobs")
        .unwrap();
    let s = text(&store(&db, &["status"], b"").stdout);
    let line = s.lines().find(|l| l.starts_with("last ingest: "));
    assert!(line.is_some_and(|l| l.ends_with("Z (2 jobs)")), "{s}");
    assert!(!s.contains("harvest"), "{s}");
}

#[test]
fn status_without_a_database_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = store(&dir.path().join("none.db"), &["status"], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no database"));
}

#[test]
fn without_home_the_history_is_in_the_users_home_not_the_current_folder() {
    // With HOME and XDG_DATA_HOME unset (cron, env -i), `put` made
    // ./hpc-sizer/hpc-sizer.db wherever it ran; a relative XDG_DATA_HOME
    // was taken too, which the XDG rules say to ignore.
    let dir = tempfile::tempdir().unwrap();
    let home = std::process::Command::new("sh")
        .args(["-c", "getent passwd \"$(id -u)\" | cut -d: -f6"])
        .output()
        .unwrap();
    let home = text(&home.stdout).trim().to_string();
    assert!(!home.is_empty());
    let want = format!("{home}/.local/share/hpc-sizer/hpc-sizer.db");
    for xdg in [None, Some("rel")] {
        let mut c = TOOL.command(&["status"]);
        c.current_dir(dir.path())
            .env_remove("HOME")
            .env_remove("HPC_SIZER_DB")
            .env_remove("XDG_DATA_HOME");
        if let Some(x) = xdg {
            c.env("XDG_DATA_HOME", x);
        }
        let out = feed(&mut c, b"");
        let (o, e) = (text(&out.stdout), text(&out.stderr));
        assert!(o.contains(&want) || e.contains(&want), "{xdg:?}: {o}{e}");
    }
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn help_matches_the_man_page() {
    let mut n = 0;
    for sub in [
        &[][..],
        &["put"][..],
        &["status"][..],
        &["dump"][..],
        &["report"][..],
        &["flags"][..],
        &["history"][..],
        &["export"][..],
    ] {
        n += TOOL.assert_help_in_man(&TOOL.help(sub)).len();
    }
    assert!(n >= 8);
}

#[test]
fn every_reading_command_takes_the_five_job_filters() {
    for sub in ["dump", "report", "flags", "history", "export"] {
        let help = TOOL.help(&[sub]);
        for flag in ["--days", "--since", "--until", "--user", "--partition"] {
            assert!(
                help.lines().any(|l| l.trim_start().starts_with(flag)),
                "{sub} lacks {flag}: {help}"
            );
        }
    }
}

#[test]
fn closed_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut many = String::new();
    for i in 0..20_000 {
        many.push_str(&format!(
            "{{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"{i}\",\"job_id_raw\":\"{i}\",\"state\":\"COMPLETED\",\"is_final\":true}}\n"
        ));
    }
    assert!(store(&db, &["put"], many.as_bytes()).status.success());
    let first = TOOL.closed_pipe(&["--db", db.to_str().unwrap(), "dump"], drop);
    assert!(first.starts_with("{\"kind\":\"job\""), "{first}");
}

#[test]
fn paths_prints_the_defaults_every_tool_uses() {
    let run = |args: &[&str]| {
        TOOL.command(args)
            .env("XDG_DATA_HOME", "/x/data")
            .env("HPC_SIZER_SPOOL", "/y/spool")
            .env_remove("HPC_SIZER_DB")
            .output()
            .unwrap()
    };
    let all = run(&["paths"]);
    assert_eq!(all.status.code(), Some(0));
    assert_eq!(
        text(&all.stdout),
        "data=/x/data/hpc-sizer\ndb=/x/data/hpc-sizer/hpc-sizer.db\nspool=/y/spool\n"
    );
    assert_eq!(
        text(&run(&["--db", "/z.db", "paths", "db"]).stdout),
        "/z.db\n"
    );
    let bad = run(&["paths", "home"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}
