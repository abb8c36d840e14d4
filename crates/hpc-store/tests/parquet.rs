//! The Parquet path: `export --parquet` writes a hive-partitioned dataset
//! that `report --parquet` (polars) and other readers (Python) read back with
//! the same numbers as the SQLite report.
#![cfg(feature = "parquet")]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hpc_db::{JobFilter, Store};
use hpc_store::parquet::{export, parquet_rows};
use hpc_store::report::{finish, sqlite_rows, By, Groups, Row};
use hpc_testkit::distinct_job;

const BIN: &str = env!("CARGO_BIN_EXE_hpc-store");

/// Made once from tests/fixtures/sacct with hpc-ingest --ndjson, plus
/// hand-written jobs and analysis records (see its README).
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hpc-store/jobs.ndjson")
}

/// A command isolated from the caller's database, groups and config.
fn cmd(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("HPC_SIZER_DB")
        .env_remove("HPC_SIZER_GROUPS");
    c
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A database holding the fixture.
fn fixture_db(home: &Path) -> PathBuf {
    let db = home.join("jobs.db");
    let out = cmd(home)
        .arg("--db")
        .arg(&db)
        .arg("put")
        .arg(fixture())
        .output()
        .unwrap();
    ok(out, "put");
    db
}

/// 2026-03-02T00:00:00Z, 2026-03-03T00:00:00Z.
const MAR2: i64 = 1_772_409_600;
const MAR3: i64 = MAR2 + 86_400;

fn filters() -> Vec<(&'static str, JobFilter)> {
    vec![
        ("none", JobFilter::default()),
        (
            "since",
            JobFilter {
                since: Some(MAR2),
                ..Default::default()
            },
        ),
        (
            "until",
            JobFilter {
                until: Some(MAR3),
                ..Default::default()
            },
        ),
        (
            "user+since",
            JobFilter {
                user: Some("alice".into()),
                since: Some(MAR2),
                ..Default::default()
            },
        ),
        (
            "partition+range",
            JobFilter {
                partition: Some("cpu".into()),
                since: Some(MAR2),
                until: Some(MAR3 + 86_400),
                ..Default::default()
            },
        ),
        (
            "nobody",
            JobFilter {
                user: Some("nobody".into()),
                ..Default::default()
            },
        ),
    ]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn assert_same(what: &str, sqlite: &[Row], parquet: &[Row]) {
    let keys = |r: &[Row]| r.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(sqlite), keys(parquet), "{what}: keys");
    for (s, p) in sqlite.iter().zip(parquet) {
        let (a, b) = (&s.sums, &p.sums);
        let pairs = [
            (a.jobs, b.jobs),
            (a.cpu_h, b.cpu_h),
            (a.cpu_h_known, b.cpu_h_known),
            (a.cpu_used_h, b.cpu_used_h),
            (a.cpu_wasted_h, b.cpu_wasted_h),
            (a.mem_gbh, b.mem_gbh),
            (a.mem_gbh_known, b.mem_gbh_known),
            (a.mem_wasted_gbh, b.mem_wasted_gbh),
            (a.gpu_h, b.gpu_h),
        ];
        assert!(
            pairs.iter().all(|(x, y)| close(*x, *y)),
            "{what}: {}: sqlite {a:?} parquet {b:?}",
            s.key
        );
    }
}

#[test]
fn parquet_rows_equal_sqlite_rows_for_every_grouping_and_filter() {
    let home = tempfile::tempdir().unwrap();
    let db = fixture_db(home.path());
    let store = Store::open(&db).unwrap();
    let dir = home.path().join("ds");
    let st = export(&store, &dir, &JobFilter::default()).unwrap();
    assert_eq!(st.jobs, 43);
    let mut groups = Groups::new();
    groups.insert("alice".into(), "physics-group".into());
    for (name, f) in filters() {
        for by in By::ALL {
            let what = format!("{name} by {}", by.name());
            let s = finish(by, sqlite_rows(&store, by, &f).unwrap(), &groups).0;
            let p = finish(by, parquet_rows(&dir, by, &f).unwrap(), &groups).0;
            assert_same(&what, &s, &p);
            if name == "none" {
                assert!(
                    s.len() > 1,
                    "{what}: the fixture should give several groups"
                );
            }
        }
    }
    // The tool comes from analysis records, else the job name.
    let tools = finish(
        By::Tool,
        parquet_rows(&dir, By::Tool, &JobFilter::default()).unwrap(),
        &groups,
    )
    .0;
    let bwa = tools.iter().find(|r| r.key == "bwa").expect("a bwa row");
    assert_eq!(bwa.sums.jobs, 2.0);
    assert!(tools.iter().any(|r| r.key == "gromacs"));
    assert!(tools.iter().any(|r| r.key == "md, long"));
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn export_writes_private_date_partitions_and_replaces_them() {
    let home = tempfile::tempdir().unwrap();
    let db = fixture_db(home.path());
    let store = Store::open(&db).unwrap();
    let dir = home.path().join("out/ds");
    let st = export(&store, &dir, &JobFilter::default()).unwrap();
    let files = files_under(&dir);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    for want in [
        "end_date=2026-03-01/part-0.parquet",
        // Ends exactly at midnight: the new day.
        "end_date=2026-03-02/part-0.parquet",
        "end_date=2026-11-21/part-0.parquet",
        "end_date=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    assert_eq!(st.partitions as usize, files.len(), "{names:?}");
    assert_eq!(st.jobs, 43);
    let bytes: u64 = files.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    assert_eq!(st.bytes, bytes);
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
        assert_eq!(mode(f.parent().unwrap()), 0o700, "{}", f.display());
    }
    assert_eq!(mode(&dir), 0o700);

    // A re-export of some dates rewrites those files whole; others stay.
    let mar1 = dir.join("end_date=2026-03-01/part-0.parquet");
    let nov21 = dir.join("end_date=2026-11-21/part-0.parquet");
    fs::write(&mar1, b"stale").unwrap();
    fs::write(&nov21, b"stale").unwrap();
    let f = JobFilter {
        until: Some(MAR2),
        ..Default::default()
    };
    let st2 = export(&store, &dir, &f).unwrap();
    assert!(st2.jobs > 0 && st2.jobs < 43);
    assert_ne!(fs::read(&mar1).unwrap(), b"stale");
    assert_eq!(fs::read(&nov21).unwrap(), b"stale");
    assert_eq!(mode(&mar1), 0o600);
    assert_eq!(
        files_under(&dir).len(),
        files.len(),
        "no temporary files left"
    );
    // And a report over the mended partitions agrees with SQLite again.
    fs::remove_file(&nov21).unwrap();
    export(&store, &dir, &JobFilter::default()).unwrap();
    let s = finish(
        By::User,
        sqlite_rows(&store, By::User, &JobFilter::default()).unwrap(),
        &Groups::new(),
    )
    .0;
    let p = finish(
        By::User,
        parquet_rows(&dir, By::User, &JobFilter::default()).unwrap(),
        &Groups::new(),
    )
    .0;
    assert_same("after re-export", &s, &p);
}

/// The unfinished jobs' partition goes when none is unfinished any more.
/// Before, a re-export wrote no partition for them and left the old one:
/// each job that had ended since was in the dataset twice.
#[test]
fn the_unfinished_jobs_partition_goes_when_they_have_all_ended() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("h.db");
    let job = |state: &str, end: &str, is_final: bool| {
        format!(
            "{{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"7\",\"job_id_raw\":\"7\",\"user\":\"alice\",\"state\":\"{state}\",\"submit\":\"2026-03-01T10:00:00Z\",\"start\":\"2026-03-01T10:01:00Z\",\"end\":{end},\"alloc_cpus\":2,\"req_mem_mb\":1024.0,\"is_final\":{is_final}}}\n"
        )
    };
    let put = |text: String| {
        let f = home.path().join("in.ndjson");
        fs::write(&f, text).unwrap();
        ok(
            cmd(home.path())
                .arg("--db")
                .arg(&db)
                .arg("put")
                .arg(&f)
                .output()
                .unwrap(),
            "put",
        );
    };
    put(job("RUNNING", "null", false));
    let dir = home.path().join("ds");
    let unfinished = dir.join("end_date=__HIVE_DEFAULT_PARTITION__");
    export(&Store::open(&db).unwrap(), &dir, &JobFilter::default()).unwrap();
    assert!(unfinished.exists());
    put(job("COMPLETED", "\"2026-03-01T12:00:00Z\"", true));
    let store = Store::open(&db).unwrap();
    let st = export(&store, &dir, &JobFilter::default()).unwrap();
    assert_eq!(st.jobs, 1);
    assert!(
        !unfinished.exists(),
        "the old partition of unfinished jobs stays"
    );
    let rows = |r| finish(By::User, r, &Groups::new()).0;
    assert_same(
        "after the job ended",
        &rows(sqlite_rows(&store, By::User, &JobFilter::default()).unwrap()),
        &rows(parquet_rows(&dir, By::User, &JobFilter::default()).unwrap()),
    );
}

/// A re-export with a time bound, or into a fresh folder with any filter,
/// leaves a dataset that still holds every job. Before, each partition it
/// wrote was replaced by the filtered jobs alone: the first day's lost the
/// jobs that ended before the cut, the unfinished jobs' lost those
/// submitted outside the bounds, and a `--user` export emptied every
/// partition it wrote of everyone else's jobs.
#[test]
fn a_filtered_export_never_leaves_a_partition_with_part_of_its_jobs() {
    let home = tempfile::tempdir().unwrap();
    let db = fixture_db(home.path());
    let store = Store::open(&db).unwrap();
    let dir = home.path().join("ds");
    export(&store, &dir, &JobFilter::default()).unwrap();
    let all = || {
        finish(
            By::User,
            sqlite_rows(&store, By::User, &JobFilter::default()).unwrap(),
            &Groups::new(),
        )
        .0
    };
    let read = |d: &Path| {
        finish(
            By::User,
            parquet_rows(d, By::User, &JobFilter::default()).unwrap(),
            &Groups::new(),
        )
        .0
    };
    // Bounds in the middle of days: 2026-03-01 13:00 to 2026-03-01 23:00.
    for (since, until) in [(Some(MAR2 - 11 * 3600), None), (None, Some(MAR2 - 3600))] {
        let f = JobFilter {
            since,
            until,
            ..Default::default()
        };
        let st = export(&store, &dir, &f).unwrap();
        assert!(st.jobs > 0, "{f:?}");
        assert_same(&format!("after {f:?}"), &all(), &read(&dir));
    }
    // Another filter: refused over a dataset, and the dataset kept.
    let alice = JobFilter {
        user: Some("alice".into()),
        ..Default::default()
    };
    let err = export(&store, &dir, &alice).unwrap_err().to_string();
    assert!(err.contains("holds a dataset"), "{err}");
    assert_same("after the refused export", &all(), &read(&dir));
    // Into a new folder it writes her jobs alone.
    let hers = home.path().join("alice");
    let st = export(&store, &hers, &alice).unwrap();
    let want = finish(
        By::User,
        sqlite_rows(&store, By::User, &alice).unwrap(),
        &Groups::new(),
    )
    .0;
    assert!(st.jobs > 0);
    assert_same("her own export", &want, &read(&hers));
}

#[test]
fn export_keeps_every_job_of_a_day_larger_than_a_row_group() {
    use hpc_core::record::Job;
    use hpc_store::parquet::ROW_GROUP;
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(&home.path().join("big.db")).unwrap();
    let n = ROW_GROUP + 3;
    let jobs: Vec<Job> = (0..n)
        .map(|i| Job {
            cluster: "c".into(),
            job_id: i.to_string(),
            job_id_raw: i.to_string(),
            user: Some(["alice", "bob"][i % 2].into()),
            state: "COMPLETED".into(),
            is_final: true,
            // One row group and one row more on March 1, two on March 2.
            end: Some(
                if i <= ROW_GROUP {
                    "2026-03-01T12:00:00Z"
                } else {
                    "2026-03-02T00:00:00Z"
                }
                .into(),
            ),
            alloc_cpus: Some(1),
            cpu_hours_reserved: Some(1.0 + i as f64),
            ..Default::default()
        })
        .collect();
    let mut w = store.writer().unwrap();
    w.put_jobs(&jobs).unwrap();
    w.commit().unwrap();
    let dir = home.path().join("ds");
    let st = export(&store, &dir, &JobFilter::default()).unwrap();
    assert_eq!((st.jobs, st.partitions), (n as u64, 2));
    let all = JobFilter::default();
    let s = finish(
        By::User,
        sqlite_rows(&store, By::User, &all).unwrap(),
        &Groups::new(),
    )
    .0;
    let p = finish(
        By::User,
        parquet_rows(&dir, By::User, &all).unwrap(),
        &Groups::new(),
    )
    .0;
    assert_same("a day over a row group", &s, &p);
    assert_eq!(p.iter().map(|r| r.sums.jobs).sum::<f64>(), n as f64);
    let mar2 = JobFilter {
        since: Some(MAR2),
        ..Default::default()
    };
    let p2 = finish(
        By::User,
        parquet_rows(&dir, By::User, &mar2).unwrap(),
        &Groups::new(),
    )
    .0;
    assert_eq!(p2.iter().map(|r| r.sums.jobs).sum::<f64>(), 2.0);
}

#[test]
fn reading_a_missing_or_empty_dataset_names_the_folder() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-such-dataset");
    let e = parquet_rows(&missing, By::User, &JobFilter::default()).unwrap_err();
    assert!(e.to_string().contains("no-such-dataset"), "{e}");
    let empty = home.path().join("empty-dataset");
    fs::create_dir(&empty).unwrap();
    let e = parquet_rows(&empty, By::User, &JobFilter::default()).unwrap_err();
    assert!(e.to_string().contains("empty-dataset"), "{e}");

    let out = cmd(home.path())
        .args(["--db", "unused.db", "report", "--parquet"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-dataset"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `report --parquet DIR` prints exactly what `report` over SQLite prints.
#[test]
fn cli_report_over_parquet_equals_sqlite() {
    let home = tempfile::tempdir().unwrap();
    let db = fixture_db(home.path());
    let dir = home.path().join("ds");
    let groups = home.path().join("groups");
    fs::write(&groups, "alice physics-group\nbob chem-group\n").unwrap();
    let out = cmd(home.path())
        .arg("--db")
        .arg(&db)
        .args(["export", "--parquet"])
        .arg(&dir)
        .output()
        .unwrap();
    ok(out, "export");
    assert!(dir.join("end_date=2026-03-01/part-0.parquet").is_file());

    let filters: [&[&str]; 5] = [
        &[],
        &["--since", "2026-03-02"],
        &["--user", "alice", "--since", "2026-03-02"],
        &["--until", "2026-03-03T00:00:00"],
        &[
            "--partition",
            "cpu",
            "--since",
            "2026-03-01",
            "--until",
            "2026-03-04",
        ],
    ];
    for by in [
        "user",
        "partition",
        "account",
        "state",
        "node",
        "group",
        "tool",
    ] {
        for f in filters {
            let report = |parquet: bool| {
                let mut c = cmd(home.path());
                c.arg("--db")
                    .arg(&db)
                    .args(["report", "--by", by, "--format", "csv", "--groups"])
                    .arg(&groups)
                    .args(f);
                if parquet {
                    c.arg("--parquet").arg(&dir);
                }
                ok(c.output().unwrap(), &format!("report --by {by} {f:?}"))
            };
            let s = report(false);
            let p = report(true);
            assert_eq!(s, p, "report --by {by} {f:?}");
            assert!(s.starts_with(&format!("{by},jobs,")), "{s}");
        }
    }
}

/// Finds a Python that can import polars or duckdb, installing one of them
/// into a private venv when needed. None (after saying why) when neither can
/// be had.
fn python_reader() -> Result<(PathBuf, &'static str), String> {
    let works = |py: &Path, module: &str| {
        Command::new(py)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let system = PathBuf::from("python3");
    for m in ["polars", "duckdb"] {
        if works(&system, m) {
            return Ok((system, m));
        }
    }
    let Some(home) = std::env::var_os("HOME") else {
        return Err("no python3 with polars or duckdb, and no HOME for a venv".into());
    };
    let venv = PathBuf::from(home).join(".cache/hpc-sizer/pyenv");
    let py = venv.join("bin/python3");
    for m in ["polars", "duckdb"] {
        if works(&py, m) {
            return Ok((py, m));
        }
    }
    if !py.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .is_ok_and(|o| o.status.success());
        if !made {
            return Err(format!(
                "python3 -m venv {} failed; cannot check the dataset from Python",
                venv.display()
            ));
        }
    }
    for m in ["polars", "duckdb"] {
        let installed = Command::new(&py)
            .args(["-m", "pip", "install", "--quiet", m])
            .output();
        match installed {
            Ok(o) if o.status.success() && works(&py, m) => return Ok((py, m)),
            Ok(o) => eprintln!(
                "pip install {m} failed: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
            Err(e) => eprintln!("pip install {m} failed: {e}"),
        }
    }
    Err("neither polars nor duckdb could be installed for python3".into())
}

/// Another reader (Python polars or DuckDB, hive partitioning) sees the
/// same jobs and hours as SQLite.
#[test]
#[ignore = "needs python3 with polars or duckdb, installed into ~/.cache/hpc-sizer/pyenv when missing (network): cargo test --workspace -- --ignored (tests/run.sh runs it)"]
fn python_reads_the_dataset_with_the_same_totals() {
    let (py, module) =
        python_reader().unwrap_or_else(|why| panic!("the second-reader check cannot run: {why}"));
    let home = tempfile::tempdir().unwrap();
    let db = fixture_db(home.path());
    let store = Store::open(&db).unwrap();
    let dir = home.path().join("ds");
    export(&store, &dir, &JobFilter::default()).unwrap();
    let (jobs, cpu_h, open): (i64, f64, i64) = store
        .conn()
        .query_row(
            "SELECT count(*), total(cpu_hours_reserved), count(*) - count(end_ts) FROM jobs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let script = match module {
        "polars" => {
            "import sys, polars as pl
df = pl.scan_parquet(sys.argv[1] + '/**/*.parquet', hive_partitioning=True).collect()
print(df.height, df['cpu_hours_reserved'].sum(), df['end_date'].null_count(), df['end_ts'].dtype)"
        }
        _ => {
            "import sys, duckdb
r = duckdb.sql(\"SELECT count(*), sum(cpu_hours_reserved), count(*) - count(end_date), typeof(any_value(end_ts)) FROM read_parquet('\" + sys.argv[1] + \"/*/*.parquet', hive_partitioning = true)\").fetchone()
print(*r)"
        }
    };
    let out = Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(&dir)
        .output()
        .unwrap();
    let text = ok(out, &format!("python3 with {module}"));
    let f: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(f.len(), 4, "{text}");
    assert_eq!(f[0].parse::<i64>().unwrap(), jobs, "{module}: rows");
    let py_cpu: f64 = f[1].parse().unwrap();
    assert!(
        close(py_cpu, cpu_h),
        "{module}: cpu_hours_reserved {py_cpu} vs {cpu_h}"
    );
    assert_eq!(
        f[2].parse::<i64>().unwrap(),
        open,
        "{module}: jobs without an end"
    );
    assert!(
        f[3].eq_ignore_ascii_case("int64") || f[3] == "BIGINT",
        "{module}: end_ts is {}",
        f[3]
    );
}

/// Every field of the job table is exported, each in the Parquet column of
/// its name with its own value (times as Int64 epoch seconds).
#[test]
fn every_job_field_round_trips_through_parquet_by_name() {
    use hpc_core::fields::{Kind, Value};
    use hpc_core::slurm::Timestamp;
    use polars::prelude::{AnyValue, ParquetReader, SerReader};
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(&home.path().join("one.db")).unwrap();
    let j = distinct_job();
    let mut w = store.writer().unwrap();
    w.put_job(&j).unwrap();
    w.commit().unwrap();
    let dir = home.path().join("ds");
    let st = export(&store, &dir, &JobFilter::default()).unwrap();
    assert_eq!((st.jobs, st.partitions), (1, 1));
    let file = files_under(&dir).pop().unwrap();
    let df = ParquetReader::new(fs::File::open(&file).unwrap())
        .finish()
        .unwrap();
    assert_eq!(df.height(), 1);
    let columns = hpc_db::job_columns();
    assert_eq!(df.width(), columns.len() + 1, "the fields and the tool");
    for c in columns {
        let got = df.column(&c.name).unwrap().get(0).unwrap().into_static();
        let want = match (c.column.get)(&j) {
            Value::Text(Some(t)) if c.column.field.kind == Kind::Time => {
                AnyValue::Int64(Timestamp::from_rfc3339(t).unwrap().epoch)
            }
            Value::Text(t) => AnyValue::StringOwned(t.unwrap().into()),
            Value::Int(i) => AnyValue::Int64(i.unwrap()),
            Value::Real(x) => AnyValue::Float64(x.unwrap()),
            Value::Bool(b) => AnyValue::Int64(i64::from(b)),
        };
        assert_eq!(got, want, "column {}", c.name);
    }
}
