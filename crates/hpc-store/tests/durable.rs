//! A spool load commits durably: its files are moved away once committed.

use hpc_core::ndjson::Rejects;
use hpc_db::Store;
use hpc_store::{put_spool, SpoolOptions};

/// A spool file is moved to done/ once its records are committed and never
/// read again, so a spool load commits at synchronous=FULL, as every writer
/// now does (at NORMAL, a power loss may undo the last commits in WAL mode,
/// and its records were lost for good).
#[test]
fn a_spool_load_commits_at_full_synchronous() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("incoming");
    std::fs::create_dir(&spool).unwrap();
    std::fs::write(
        spool.join("41.ndjson"),
        "{\"kind\":\"summary\",\"job_id\":\"41\",\"peak_rss_mb\":100}\n",
    )
    .unwrap();
    let mut store = Store::open(&dir.path().join("h.db")).unwrap();
    let level = |s: &Store| -> i64 {
        s.conn()
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap()
    };
    assert_eq!(level(&store), 2, "writers open at FULL");
    let mut rejects = Rejects::new("hpc-store");
    let rep = put_spool(
        &mut store,
        &spool,
        SpoolOptions { settle_s: 0 },
        &mut rejects,
    )
    .unwrap();
    assert_eq!(rep.files, 1, "{rep:?}");
    assert!(spool.join("done/41.ndjson").exists());
    assert_eq!(level(&store), 2, "FULL");
}
