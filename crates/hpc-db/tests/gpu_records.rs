//! The probe's `gpu` records (one per GPU per sample, issue 13) are all
//! kept: two GPUs of one host at one time are two records, and storing the
//! same lines again changes nothing.

use hpc_db::Store;

fn gpu(t: f64, index: u32, util: f64) -> String {
    format!(
        r#"{{"kind":"gpu","t":{t},"host":"n1","job_id":"5","gpu_index":{index},"gpu_util":{util}}}"#
    )
}

fn count(s: &Store) -> i64 {
    s.conn()
        .query_row("SELECT count(*) FROM records WHERE kind = 'gpu'", [], |r| {
            r.get(0)
        })
        .unwrap()
}

#[test]
fn every_gpu_of_a_sample_is_kept_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("h.db")).unwrap();
    for _ in 0..2 {
        let mut w = s.writer().unwrap();
        for t in [1.0, 2.0] {
            w.put_line("gpu", &gpu(t, 0, 90.0)).unwrap();
            w.put_line("gpu", &gpu(t, 1, 0.0)).unwrap();
        }
        w.commit().unwrap();
        assert_eq!(count(&s), 4);
    }
}
