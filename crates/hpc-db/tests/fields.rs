//! Every field of the job table goes into SQLite and comes back, field by
//! field by name: a field missing from the columns, or two swapped, fails.

use hpc_core::fields::{Kind, Value};
use hpc_core::record::Job;
use hpc_core::slurm::Timestamp;
use hpc_db::{job_columns, JobFilter, Store};
use hpc_testkit::distinct_job;
use rusqlite::types::Value as SqlValue;

#[test]
fn every_job_field_round_trips_through_sqlite_by_name() {
    let j = distinct_job();
    let default = Job::default();
    for c in Job::COLUMNS {
        assert_ne!((c.get)(&j), (c.get)(&default), "{}", c.field.name);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("h.db")).unwrap();
    let mut w = s.writer().unwrap();
    w.put_job(&j).unwrap();
    w.commit().unwrap();
    let mut back = Vec::new();
    s.for_each_job(&JobFilter::default(), |b| {
        back.push(b);
        Ok(())
    })
    .unwrap();
    assert_eq!(back.len(), 1);
    for c in Job::COLUMNS {
        assert_eq!((c.get)(&back[0]), (c.get)(&j), "{}", c.field.name);
    }
    // Each field sits in the column of its name (a time as epoch seconds).
    for c in job_columns() {
        let sql = format!(r#"SELECT "{}" FROM jobs"#, c.name);
        let got: SqlValue = s.conn().query_row(&sql, [], |r| r.get(0)).unwrap();
        let want = match (c.column.get)(&j) {
            Value::Text(Some(t)) if c.column.field.kind == Kind::Time => {
                SqlValue::Integer(Timestamp::from_rfc3339(t).unwrap().epoch)
            }
            Value::Text(t) => SqlValue::Text(t.unwrap().to_owned()),
            Value::Int(i) => SqlValue::Integer(i.unwrap()),
            Value::Real(x) => SqlValue::Real(x.unwrap()),
            Value::Bool(b) => SqlValue::Integer(i64::from(b)),
        };
        assert_eq!(got, want, "column {}", c.name);
    }
}
