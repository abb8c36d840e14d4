//! Opening a new file for writing while another process holds it.

use std::time::{Duration, Instant};

use hpc_db::Store;

/// A writer that opens a new file while another connection reads it waits
/// for the reader (within the busy timeout) instead of failing with
/// "database is locked". (Sixteen hpc-ingest writers on one new file failed
/// that way once, under heavy load, in sixteen_concurrent_writers_lose_nothing;
/// the switch to WAL mode is now retried within the busy timeout. This test
/// holds the waiting behaviour; it did not reproduce that failure.)
#[test]
fn a_writer_waits_for_a_reader_of_a_new_file_before_switching_it_to_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    // A new file in the default rollback mode, with a reader inside a
    // transaction (a shared lock) for 300 ms. (Its schema is empty: a file
    // with tables of another program's is refused.)
    let reader = rusqlite::Connection::open(&path).unwrap();
    reader
        .execute_batch(
            "PRAGMA page_size = 4096; VACUUM; BEGIN; SELECT count(*) FROM sqlite_master;",
        )
        .unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        reader.execute_batch("COMMIT").unwrap();
    });
    let t0 = Instant::now();
    let store = Store::open(&path);
    release.join().unwrap();
    let store = store.unwrap_or_else(|e| panic!("open failed after {:?}: {e}", t0.elapsed()));
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t0.elapsed()
    );
    let mode: String = store
        .conn()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

/// A writer's commits are durable (synchronous=FULL): hpc-harvest moves its
/// sacct watermark past what hpc-ingest committed, and a spool's file goes
/// to done/ once its records are; at NORMAL, a power loss may take back the
/// last commits in WAL mode.
#[test]
fn a_writer_commits_durably() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
    let sync: i64 = store
        .conn()
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 2, "FULL");
}
