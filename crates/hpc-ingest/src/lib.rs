//! hpc-ingest: `sacct --parsable2` text in, job records out (to the history
//! database or as NDJSON).
//!
//! [`sacct`] maps the columns and merges step lines into their job; [`run`]
//! drives one or more inputs through it, reporting bad lines with their
//! number and reason while every good line is kept.

pub mod cli;
pub mod sacct;

pub use cli::{main_with, Args};

use std::io::{BufRead, Write};

use hpc_core::input::{Inputs, Line};
use hpc_core::ndjson::Rejects;
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

/// Called every so many lines with the count so far (for a progress bar).
pub type Progress<'a> = &'a mut dyn FnMut(u64);

/// Jobs sent to the database thread at a time.
const CHUNK: usize = 4096;

/// Reads every input (`stdin` for `-`) and sends the merged jobs to
/// `sink`. With a database sink, parsing and storing run on two threads
/// joined by a bounded channel.
pub fn run(
    opts: &Opts,
    inputs: &Inputs,
    stdin: impl BufRead,
    sink: &mut Sink<'_>,
    progress: Progress<'_>,
) -> Result<Stats> {
    let read = Read {
        opts,
        inputs,
        progress,
    };
    match sink {
        Sink::Ndjson(out) => {
            let mut buf = Vec::with_capacity(1024);
            let mut stats = read.parse_all(stdin, &mut |job| {
                buf.clear();
                tag_into(&mut buf, "job", &job)?;
                out.write_all(&buf)?;
                Ok(())
            })?;
            out.flush()?;
            stats.kept = 0;
            Ok(stats)
        }
        Sink::Store { store, batch } => read.into_store(stdin, store, *batch),
    }
}

/// What reading needs: the options, the inputs and the progress report.
struct Read<'a, 'p> {
    opts: &'a Opts,
    inputs: &'a Inputs,
    progress: Progress<'p>,
}

impl Read<'_, '_> {
    /// Parses on this thread and stores on another, `per_tx` jobs per
    /// transaction.
    fn into_store(self, stdin: impl BufRead, store: &mut Store, per_tx: usize) -> Result<Stats> {
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(4);
            let db = scope.spawn(move || store_chunks(store, rx, per_tx));
            let mut chunk = Vec::with_capacity(CHUNK);
            let parsed = self.parse_all(stdin, &mut |job| {
                chunk.push(job);
                if chunk.len() >= CHUNK {
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                    // A closed channel means the database thread failed:
                    // its error is reported by the join below.
                    if tx.send(full).is_err() {
                        return Err(hpc_core::Error::Other("the database writer stopped".into()));
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
                .map_err(|_| hpc_core::Error::Other("the database writer panicked".into()))??;
            let mut stats = parsed?;
            stats.kept = kept.min(stats.jobs);
            Ok(stats)
        })
    }

    /// Parses every input, calling `emit` for each finished job.
    fn parse_all(
        self,
        stdin: impl BufRead,
        emit: &mut dyn FnMut(Job) -> Result<()>,
    ) -> Result<Stats> {
        let mut rejects = Rejects::new("hpc-ingest");
        rejects.strict = self.opts.strict;
        let mut parser = Parser {
            opts: self.opts,
            progress: self.progress,
            emit,
            stats: Stats::default(),
            notes: Notes::default(),
            spare: Vec::with_capacity(64),
        };
        self.inputs.for_each(stdin, |input| {
            let mut state = InputState::new(self.opts)?;
            let lines = input.for_each_line(&mut rejects, |rejects, line| {
                parser.line(&mut state, rejects, &line)
            })?;
            parser.stats.lines += lines;
            match state.current.take() {
                Some(done) => parser.send(done),
                None => Ok(()),
            }
        })?;
        let mut stats = parser.stats;
        stats.rejected = rejects.rejected;
        stats.notes = parser.notes;
        Ok(stats)
    }
}

/// The database thread: each chunk of jobs into the store, `per_tx` jobs
/// per transaction; returns the jobs the store kept as they were.
fn store_chunks(
    store: &mut Store,
    rx: std::sync::mpsc::Receiver<Vec<Job>>,
    per_tx: usize,
) -> Result<u64> {
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
}

/// What one input's lines build up.
struct InputState {
    /// The columns, from `--fields`, the input's header or the default.
    cols: Option<Columns>,
    /// The job whose step lines are being read.
    current: Option<Pending>,
    /// The job part of a rejected job line, so its steps are not reported
    /// twice.
    rejected_key: Option<String>,
    /// The header line taken, and whether a data line has come since the
    /// input began: a header is taken only before the first data line.
    header: Option<String>,
    data_seen: bool,
    /// Whether the input ends every line with the delimiter (`--parsable`,
    /// not `--parsable2`): as its header does, else as its first data line
    /// does. Decided once, not line by line: a '|' in a job name on a line
    /// whose last value is empty looks like one line by line.
    trailing: Option<bool>,
}

impl InputState {
    fn new(opts: &Opts) -> Result<Self> {
        let cols = match &opts.fields {
            Some(f) => Some(
                Columns::from_names(f.iter().map(String::as_str))
                    .map_err(hpc_core::Error::Usage)?,
            ),
            None => None,
        };
        Ok(InputState {
            cols,
            current: None,
            rejected_key: None,
            header: None,
            data_seen: false,
            trailing: None,
        })
    }
}

/// Turns lines into jobs across the inputs.
struct Parser<'a, 'e> {
    opts: &'a Opts,
    progress: Progress<'a>,
    emit: &'e mut dyn FnMut(Job) -> Result<()>,
    stats: Stats,
    notes: Notes,
    /// A field buffer reused across lines: emptied and handed back at the
    /// end of each line (collecting an empty vector in place keeps its
    /// allocation).
    spare: Vec<&'static str>,
}

impl Parser<'_, '_> {
    /// Finishes a job and hands it on.
    fn send(&mut self, done: Pending) -> Result<()> {
        let job = done.finish(&mut self.notes);
        self.stats.jobs += 1;
        if job.is_final {
            self.stats.final_jobs += 1;
        }
        (self.emit)(job)
    }

    /// Reads one line: a header, a job line or a step line.
    fn line(&mut self, st: &mut InputState, rejects: &mut Rejects, line: &Line) -> Result<()> {
        let (n, progress) = (self.stats.lines + line.number, &mut self.progress);
        if n % 65536 == 0 {
            progress(n);
        }
        let mut fields: Vec<&str> = std::mem::take(&mut self.spare);
        sacct::split_line(line.text, &self.opts.delimiter, &mut fields);
        let done = self.fields(st, rejects, line, &mut fields);
        fields.clear();
        self.spare = fields.into_iter().map(|_| "").collect();
        done
    }

    /// Reads the fields of one line.
    fn fields(
        &mut self,
        st: &mut InputState,
        rejects: &mut Rejects,
        line: &Line,
        fields: &mut Vec<&str>,
    ) -> Result<()> {
        let delimiter = &self.opts.delimiter;
        if Columns::is_header(st.cols.as_ref(), fields) {
            if st.data_seen {
                // sacct -P does not escape the delimiter in a value: a job
                // name holding '|JobID|...' would otherwise become the
                // column map of the lines after it, and its next job's
                // name another user's record. The same header again
                // (inputs joined with cat) is passed over.
                if st.header.as_deref() != Some(line.text) {
                    line.reject(
                        rejects,
                        &format!(
                            "a header after data lines (a '{delimiter}' inside a value?): not taken"
                        ),
                    )?;
                }
                return Ok(());
            }
            let trailing = fields.len() > 1 && fields.last() == Some(&"");
            if trailing {
                fields.pop();
            }
            st.trailing = Some(trailing);
            match Columns::from_names(fields.iter().copied()) {
                Ok(c) => {
                    st.cols = Some(c);
                    st.header = Some(line.text.to_owned());
                }
                Err(e) => line.reject(rejects, &format!("header: {e}"))?,
            }
            return Ok(());
        }
        st.data_seen = true;
        let cols = st
            .cols
            .get_or_insert_with(|| Columns::builtin(fields.len()));
        // `--parsable` (not `--parsable2`) ends every line with the delimiter.
        let trailing = *st
            .trailing
            .get_or_insert(fields.len() == cols.count() + 1 && fields.last() == Some(&""));
        if trailing && fields.last() == Some(&"") {
            fields.pop();
        }
        let outcome = if fields.len() != cols.count() {
            Err(format!(
                "{} fields, expected {} (a '{delimiter}' inside a value, or a different field list?)",
                fields.len(),
                cols.count(),
            ))
        } else {
            sacct::parse_line(fields, cols, &self.opts.parse)
        };
        match outcome {
            Ok(Parsed::Job(p)) => {
                if let Some(done) = st.current.take() {
                    self.send(done)?;
                }
                st.rejected_key = None;
                st.current = Some(*p);
                Ok(())
            }
            Ok(Parsed::Step(key, step)) => match st.current.as_mut() {
                Some(p) if p.key() == key => {
                    p.add_step(step);
                    Ok(())
                }
                _ if st.rejected_key.as_deref() == Some(key) => {
                    line.reject(rejects, &format!("step of the rejected job line {key}"))
                }
                _ => line.reject(rejects, &format!("step line without its job line {key}")),
            },
            // A last line without its newline is read like any other:
            // sacct writes whole lines, so one that does not parse is a
            // reject, never a tolerated truncation.
            Err(reason) => {
                if let Some(k) = fields.first().and_then(|f| f.split('.').next()) {
                    st.rejected_key = Some(k.trim().to_owned());
                }
                line.reject(rejects, &reason)
            }
        }
    }
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
            &Inputs::new(Vec::new()).unwrap(),
            input,
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
