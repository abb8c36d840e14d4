//! The reader threads: files handed out one at a time to a fixed number of
//! threads, each read (and folded, when the job's start is known) on its
//! thread, the results passed back one by one to the calling thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use hpc_core::{Error, Result};

use crate::bins::{Aggregate, NodeBins};
use crate::combine::{fold_node, Hosts, NodeStat};
use crate::input::{NodeData, StreamResult};
use crate::{read_one, Opts};

/// What a reader thread passes back.
pub(crate) enum Msg {
    /// One input read, with its nodes folded on the thread (when the job's
    /// start was known; the result then keeps only the nodes' metas).
    Read(StreamResult, Vec<(NodeStat, f64)>),
    /// The thread's own sums, once it has no more files.
    Sums(Aggregate),
    Failed(Error),
}

/// The inputs and what reading one needs.
pub(crate) struct Reader<'a> {
    pub opts: &'a Opts,
    pub names: &'a [String],
    pub hosts: &'a Hosts<'a>,
    pub step: f64,
    /// The job's earliest start, when known before reading.
    pub origin: Option<f64>,
}

/// Reads every input on `threads` threads and gives each message to
/// `handle` on the calling thread. After the first error (a failed read or
/// one `handle` returns) no more files are handed out; that error is
/// returned.
pub(crate) fn read_all(
    reader: &Reader,
    threads: usize,
    mut handle: impl FnMut(Msg) -> Result<()>,
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<Msg>(0);
    std::thread::scope(|s| -> Result<()> {
        for _ in 0..threads {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || worker(reader, next, tx));
        }
        drop(tx);
        let mut first_err = None;
        for msg in rx {
            if let Err(e) = handle(msg) {
                // Stop handing out files; keep the first error.
                next.store(usize::MAX / 2, Ordering::Relaxed);
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    })
}

/// One reader thread: takes the next file until none are left or one
/// fails, then sends its sums.
fn worker(reader: &Reader, next: &AtomicUsize, tx: mpsc::SyncSender<Msg>) {
    let mut sums = Aggregate::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= reader.names.len() {
            break;
        }
        let mut none = std::io::empty();
        let read = read_one(reader.opts, i, &reader.names[i], &mut none, reader.step);
        let msg = match (read, reader.origin) {
            (Ok(r), Some(o)) => fold_read(reader, i, o, r, &mut sums),
            (Ok(r), None) => Msg::Read(r, Vec::new()),
            (Err(e), _) => Msg::Failed(e),
        };
        let failed = matches!(msg, Msg::Failed(_));
        if tx.send(msg).is_err() || failed {
            return;
        }
    }
    let _ = tx.send(Msg::Sums(sums));
}

/// Folds the nodes of input `i` into the thread's `sums`, aligned against
/// the job's start `origin`.
fn fold_read(
    reader: &Reader,
    i: usize,
    origin: f64,
    mut r: StreamResult,
    sums: &mut Aggregate,
) -> Msg {
    let mut folded = Vec::new();
    let mut failed = None;
    for n in std::mem::take(&mut r.nodes) {
        // Keep the metas for the job id and node count.
        r.nodes.push(NodeData {
            host: String::new(),
            bins: NodeBins::new(reader.step),
            meta: n.meta.clone(),
            sample_job_id: n.sample_job_id.clone(),
        });
        if n.bins.samples > 0 && !reader.hosts.claim(&n.host, i) {
            n.bins.recycle();
            continue;
        }
        match fold_node(reader.opts, reader.step, origin, sums, n) {
            Ok(f) => folded.push(f),
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) => Msg::Failed(e),
        None => Msg::Read(r, folded),
    }
}
