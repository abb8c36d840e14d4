//! hpc-ingest: `sacct --parsable2` text in, job records out (to the history
//! database or as NDJSON).
//!
//! [`sacct`] maps the columns and merges step lines into their job; [`run`]
//! drives one or more inputs through it, reporting bad lines with their
//! number and reason while every good line is kept.

pub mod cli;
pub mod gen;
pub mod sacct;

use std::io::{BufRead, Write};

use hpc_core::ndjson::{LineReader, Rejects};
use hpc_core::record::{tag_into, Job};
use hpc_core::Result;
use hpc_db::Store;

use sacct::{Columns, Notes, ParseOpts, Parsed, Pending};

/// Where the jobs go.
pub enum Sink<'a> {
    /// NDJSON job records to this writer.
    Ndjson(&'a mut dyn Write),
    /// Into the database, one transaction per `batch` jobs.
    Store {
        /// The open store.
        store: &'a mut Store,
        /// Jobs per transaction.
        batch: usize,
    },
}

/// Validated options.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Column names when the input has no header line.
    pub fields: Option<Vec<String>>,
    /// The field delimiter (`|` for `--parsable2`).
    pub delimiter: String,
    /// Conversion options (cluster, time zone).
    pub parse: ParseOpts,
    /// Stop at the first bad line.
    pub strict: bool,
}

/// What a run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Lines read.
    pub lines: u64,
    /// Jobs written.
    pub jobs: u64,
    /// Jobs in a final state.
    pub final_jobs: u64,
    /// Jobs the store kept as they were (a final record is never replaced
    /// by a non-final one).
    pub kept: u64,
    /// Lines rejected.
    pub rejected: u64,
    /// Notes on the input.
    pub notes: Notes,
}

/// One input to read: a name for messages and the reader.
pub struct Input<'a> {
    /// The name used in messages (`None` for stdin).
    pub name: Option<String>,
    /// The text.
    pub reader: Box<dyn BufRead + 'a>,
}

/// Called every so many lines with the count so far (for a progress bar).
pub type Progress<'a> = &'a mut dyn FnMut(u64);

/// Jobs sent to the database thread at a time.
const CHUNK: usize = 4096;

/// Reads every input and sends the merged jobs to `sink`. With a database
/// sink, parsing and storing run on two threads joined by a bounded channel.
pub fn run(
    opts: &Opts,
    inputs: Vec<Input<'_>>,
    sink: &mut Sink<'_>,
    progress: Progress<'_>,
) -> Result<Stats> {
    match sink {
        Sink::Ndjson(out) => {
            let mut buf = Vec::with_capacity(1024);
            let mut stats = parse_all(opts, inputs, progress, &mut |job| {
                buf.clear();
                tag_into(&mut buf, "job", &job)?;
                out.write_all(&buf)?;
                Ok(())
            })?;
            out.flush()?;
            stats.kept = 0;
            Ok(stats)
        }
        Sink::Store { store, batch } => {
            let per_tx = *batch;
            std::thread::scope(|scope| {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(4);
                let db = scope.spawn(move || -> Result<u64> {
                    let mut kept = 0;
                    let mut chunks = rx.into_iter().peekable();
                    while chunks.peek().is_some() {
                        let mut w = store.writer()?;
                        let mut in_tx = 0;
                        while in_tx < per_tx {
                            let Some(chunk) = chunks.next() else { break };
                            w.put_jobs(&chunk)?;
                            in_tx += chunk.len();
                        }
                        kept += w.commit()?.jobs_kept;
                    }
                    Ok(kept)
                });
                let mut chunk = Vec::with_capacity(CHUNK);
                let parsed = parse_all(opts, inputs, progress, &mut |job| {
                    chunk.push(job);
                    if chunk.len() >= CHUNK {
                        let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                        // A closed channel means the database thread failed:
                        // its error is reported by the join below.
                        if tx.send(full).is_err() {
                            return Err(hpc_core::Error::Other(
                                "the database writer stopped".into(),
                            ));
                        }
                    }
                    Ok(())
                });
                if parsed.is_ok() && !chunk.is_empty() {
                    let _ = tx.send(chunk);
                }
                drop(tx);
                let kept = db
                    .join()
                    .map_err(|_| hpc_core::Error::Other("the database writer panicked".into()))?;
                let mut stats = match (parsed, kept) {
                    (_, Err(e)) => return Err(e),
                    (Err(e), _) => return Err(e),
                    (Ok(s), Ok(k)) => {
                        let mut s = s;
                        s.kept = k;
                        s
                    }
                };
                stats.kept = stats.kept.min(stats.jobs);
                Ok(stats)
            })
        }
    }
}

/// Parses every input, calling `emit` for each finished job.
fn parse_all(
    opts: &Opts,
    inputs: Vec<Input<'_>>,
    progress: Progress<'_>,
    emit: &mut dyn FnMut(Job) -> Result<()>,
) -> Result<Stats> {
    let mut stats = Stats::default();
    let mut send = |job: Job, stats: &mut Stats| -> Result<()> {
        stats.jobs += 1;
        if job.is_final {
            stats.final_jobs += 1;
        }
        emit(job)
    };
    let mut rejects = Rejects::new("hpc-ingest");
    rejects.strict = opts.strict;
    let mut notes = Notes::default();
    // A field buffer reused across lines: emptied and handed back at the end
    // of each line (collecting an empty vector in place keeps its allocation).
    let mut spare: Vec<&'static str> = Vec::with_capacity(64);
    for input in inputs {
        let name = input.name.as_deref();
        let mut lines = LineReader::new(input.reader);
        let mut cols: Option<Columns> = match &opts.fields {
            Some(f) => Some(
                Columns::from_names(f.iter().map(String::as_str))
                    .map_err(hpc_core::Error::Usage)?,
            ),
            None => None,
        };
        let mut current: Option<Pending> = None;
        // The job part of a rejected job line, so its steps are not reported twice.
        let mut rejected_key: Option<String> = None;
        while let Some(line) = lines.next_line()? {
            stats.lines += 1;
            if stats.lines % 65536 == 0 {
                progress(stats.lines);
            }
            let line = match line {
                Ok(l) => l,
                Err((n, reason)) => {
                    rejects.reject(name, n, &reason)?;
                    continue;
                }
            };
            if line.text.trim().is_empty() {
                continue;
            }
            let mut fields: Vec<&str> = std::mem::take(&mut spare);
            sacct::split_line(line.text, &opts.delimiter, &mut fields);
            if Columns::is_header(cols.as_ref(), &fields) {
                if let Some(last) = fields.last() {
                    if last.is_empty() && fields.len() > 1 {
                        fields.pop();
                    }
                }
                match Columns::from_names(fields.iter().copied()) {
                    Ok(c) => cols = Some(c),
                    Err(e) => rejects.reject(name, line.number, &format!("header: {e}"))?,
                }
                continue;
            }
            let cols = cols.get_or_insert_with(|| Columns::builtin(fields.len()));
            // `--parsable` (not `--parsable2`) ends every line with the delimiter.
            if fields.len() == cols.count() + 1 && fields.last() == Some(&"") {
                fields.pop();
            }
            let outcome = if fields.len() != cols.count() {
                Err(format!(
                    "{} fields, expected {} (a '{}' inside a value, or a different field list?)",
                    fields.len(),
                    cols.count(),
                    opts.delimiter
                ))
            } else {
                sacct::parse_line(&fields, cols, &opts.parse)
            };
            match outcome {
                Ok(Parsed::Job(p)) => {
                    if let Some(done) = current.take() {
                        send(done.finish(&mut notes), &mut stats)?;
                    }
                    rejected_key = None;
                    current = Some(*p);
                }
                Ok(Parsed::Step(key, step)) => match current.as_mut() {
                    Some(p) if p.key() == key => p.add_step(step),
                    _ if rejected_key.as_deref() == Some(key) => {
                        rejects.reject(
                            name,
                            line.number,
                            &format!("step of the rejected job line {key}"),
                        )?;
                    }
                    _ => {
                        rejects.reject(
                            name,
                            line.number,
                            &format!("step line without its job line {key}"),
                        )?;
                    }
                },
                // A last line without its newline is read like any other:
                // sacct writes whole lines, so one that does not parse is a
                // reject, never a tolerated truncation.
                Err(reason) => {
                    if let Some(k) = fields.first().and_then(|f| f.split('.').next()) {
                        rejected_key = Some(k.trim().to_owned());
                    }
                    rejects.reject(name, line.number, &reason)?;
                }
            }
            fields.clear();
            spare = fields.into_iter().map(|_| "").collect();
        }
        if let Some(done) = current.take() {
            send(done.finish(&mut notes), &mut stats)?;
        }
    }
    stats.rejected = rejects.rejected;
    stats.notes = notes;
    Ok(stats)
}

/// Writes the one-line summary of a run on `err`.
pub fn report(err: &mut dyn Write, stats: &Stats, target: &str) -> std::io::Result<()> {
    writeln!(
        err,
        "hpc-ingest: {} jobs ({} final) from {} lines {}; {} rejected{}",
        stats.jobs,
        stats.final_jobs,
        stats.lines,
        target,
        stats.rejected,
        if stats.kept > 0 {
            format!(
                "; {} final records kept over older non-final input",
                stats.kept
            )
        } else {
            String::new()
        }
    )?;
    if stats.notes.no_step_cpu > 0 {
        writeln!(
            err,
            "hpc-ingest: {} jobs had no step lines and TotalCPU 0 (sacct -X?): their total_cpu_s and cpu_eff are left empty; run sacct without -X to get them",
            stats.notes.no_step_cpu
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sacct::ParseOpts;

    fn opts() -> Opts {
        Opts {
            fields: None,
            delimiter: "|".into(),
            parse: ParseOpts {
                cluster: "c".into(),
                zone: hpc_core::slurm::Zone::utc(),
            },
            strict: false,
        }
    }

    fn ndjson(input: &[u8]) -> (Result<Stats>, Vec<u8>) {
        let mut out = Vec::new();
        let r = run(
            &opts(),
            vec![Input {
                name: None,
                reader: Box::new(input),
            }],
            &mut Sink::Ndjson(&mut out),
            &mut |_| {},
        );
        (r, out)
    }

    #[test]
    fn steps_merge_into_their_job() {
        let text = b"JobID|State|Elapsed|AllocCPUS|NTasks|ReqMem|MaxRSS|TotalCPU\n\
            7|COMPLETED|00:00:10|4||4000Mc||00:20.000\n\
            7.batch|COMPLETED|00:00:10|4|1||1024K|00:05.000\n\
            7.0|COMPLETED|00:00:10|4|2||2048K|00:15.000\n";
        let (r, out) = ndjson(text);
        let st = r.unwrap();
        assert_eq!((st.jobs, st.rejected, st.lines), (1, 0, 4));
        let j: Job =
            hpc_core::record::from_line(std::str::from_utf8(&out).unwrap().trim()).unwrap();
        assert_eq!(j.req_mem_mb, Some(16000.0));
        assert_eq!(j.max_rss_mb, Some(2.0));
        assert_eq!(j.ntasks, Some(2));
        assert_eq!(j.total_cpu_s, Some(20.0));
        assert_eq!(j.cpu_eff, Some(50.0));
        // 2 MiB x 2 tasks of 16000 MiB
        assert_eq!(j.mem_eff, Some(0.025));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let mut text = b"JobID|JobIDRaw|State|Elapsed|AllocCPUS|NNodes|NTasks|ReqMem|MaxRSS|TotalCPU|AllocTRES|Submit|Start|End\n".to_vec();
            text.extend_from_slice(&body);
            let (r, _) = ndjson(&text);
            proptest::prop_assert!(r.is_ok());
        }

        #[test]
        fn sacct_like_lines_never_panic(lines in proptest::collection::vec("[0-9a-zA-Z_.+:|\\-\\[\\]%=, ]{0,80}", 0..20)) {
            let mut text = String::from("JobID|JobIDRaw|State|Elapsed|AllocCPUS|NNodes|NTasks|ReqMem|MaxRSS|TotalCPU|AllocTRES|Submit|Start|End\n");
            for l in lines {
                text.push_str(&l);
                text.push('\n');
            }
            let (r, _) = ndjson(text.as_bytes());
            proptest::prop_assert!(r.is_ok());
        }
    }
}
