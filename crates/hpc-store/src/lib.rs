//! hpc-store: the history database from the command line.
//!
//! - `put`: NDJSON records of any kind into the database, from stdin, files,
//!   or every finished file of a spool folder (`--spool`, the single-writer
//!   path for shared file systems);
//! - `status`: what the database holds;
//! - `dump`: records back out as NDJSON, filtered by kind, user, partition,
//!   tool and date;
//! - `report`: jobs, CPU, memory and GPU hours, efficiencies and waste,
//!   grouped by user, account, group, partition, node, state or tool
//!   ([`report`]), from the database or (`--parquet`) an exported dataset;
//! - `flags`: how often each flag was raised, or the flagged jobs;
//! - `history`: the distribution of one tool's peak memory, CPU efficiency
//!   and elapsed time;
//! - `export`: the jobs table as date-partitioned Parquet (the `parquet`
//!   feature, the `parquet` module);
//! - `paths`: where the tools keep their data, database and spool.
//!
//! Every query is a named function of hpc-db ([`hpc_db::query`]); this crate
//! writes no SQL and does not link SQLite itself.

pub mod cli;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod report;

pub use cli::{main_with, Args};

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use hpc_core::input::{Input, Line};
use hpc_core::ndjson::Rejects;
use hpc_core::paths::shown;
use hpc_core::record::peek_kind;
use hpc_core::{Error, IoContext, Result};
use hpc_db::{JobFilter, PutError, PutStats, Store};

/// What `put` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PutReport {
    /// Lines read.
    pub lines: u64,
    /// Records written.
    pub written: PutStats,
    /// Spool files loaded.
    pub files: u64,
    /// Spool files left alone because they could not be read or are not
    /// plain files of the loading user (each reported on stderr).
    pub skipped: u64,
    /// Spool files left for a later run because their last line is not
    /// complete yet.
    pub waiting: u64,
}

impl std::ops::AddAssign for PutReport {
    fn add_assign(&mut self, o: PutReport) {
        self.lines += o.lines;
        self.written += o.written;
        self.files += o.files;
        self.skipped += o.skipped;
        self.waiting += o.waiting;
    }
}

/// Lines gathered before a write transaction starts: `put` holds the write
/// lock only while it writes what it has already read, never while it waits
/// for more input (so `hpc-store dump | ... | hpc-store put` on one file
/// cannot lock itself out).
const BATCH_LINES: usize = 20_000;
/// ... or this many bytes, whichever comes first.
const BATCH_BYTES: usize = 16 << 20;

/// One line read, waiting for its transaction.
struct Pending {
    number: u64,
    text: String,
    unterminated: bool,
}

/// The lines read and not yet written.
#[derive(Default)]
struct Batch {
    lines: Vec<Pending>,
    bytes: usize,
}

impl Batch {
    fn push(&mut self, line: &Line) {
        self.bytes += line.text.len();
        self.lines.push(Pending {
            number: line.number,
            text: line.text.to_owned(),
            unterminated: line.unterminated,
        });
    }

    fn is_full(&self) -> bool {
        self.lines.len() >= BATCH_LINES || self.bytes >= BATCH_BYTES
    }

    /// Writes the batch in one transaction and empties it; with `guard`,
    /// only the records it takes.
    fn write(
        &mut self,
        store: &mut Store,
        source: Option<&str>,
        rejects: &mut Rejects,
        guard: Option<&Guard>,
    ) -> hpc_db::Result<PutStats> {
        let mut w = store.writer()?;
        for p in &self.lines {
            let outcome = match peek_kind(&p.text) {
                None => Err(PutError::Bad("not a JSON object with a \"kind\"".into())),
                Some(kind) => match guard.map(|g| g.check(&w, &kind, &p.text)) {
                    Some(Err(e)) => Err(e),
                    // sacct's record of the job stands.
                    Some(Ok(Verdict::Skip)) => Ok(()),
                    None | Some(Ok(Verdict::Take)) => w.put_line(&kind, &p.text),
                },
            };
            let line = Line {
                source,
                number: p.number,
                text: &p.text,
                unterminated: p.unterminated,
            };
            match outcome {
                Ok(()) => {}
                Err(PutError::Store(e)) => return Err(e),
                Err(PutError::Bad(why)) => line.bad_record(rejects, &why)?,
            }
        }
        self.lines.clear();
        self.bytes = 0;
        w.commit()
    }
}

/// Loads NDJSON records from one input, committing in batches. Bad lines
/// are reported (with the input's name and line number) and skipped; a
/// last line cut off mid-record (a killed writer) is tolerated with a
/// warning. A failure of the database stops the load with an error.
pub fn put_reader(store: &mut Store, input: Input, rejects: &mut Rejects) -> Result<PutReport> {
    put_guarded(store, input, rejects, None)
}

fn put_guarded(
    store: &mut Store,
    input: Input,
    rejects: &mut Rejects,
    guard: Option<&Guard>,
) -> Result<PutReport> {
    let mut rep = PutReport::default();
    let mut batch = Batch::default();
    let source = input.source().map(str::to_owned);
    let source = source.as_deref();
    rep.lines = input.for_each_line(rejects, |rejects, line| {
        batch.push(&line);
        if batch.is_full() {
            rep.written += batch.write(store, source, rejects, guard)?;
        }
        Ok(())
    })?;
    if !batch.lines.is_empty() {
        rep.written += batch.write(store, source, rejects, guard)?;
    }
    Ok(rep)
}

/// What a root loader takes from another user's spool: records of that
/// user's own jobs only, as sacct knows them (the stored job records), and
/// never a job record over sacct's.
struct Guard {
    /// The spool owner's user name.
    user: String,
}

/// What the guard does with one record.
enum Verdict {
    /// Store it.
    Take,
    /// Leave it out quietly: the job record of a job sacct's record
    /// already describes (a spool's copy never replaces it).
    Skip,
}

/// How long a spool file that names a job the accounting data does not
/// have yet waits for the next harvest's sacct part before it is loaded
/// (and such records rejected), seconds.
const WAIT_FOR_SACCT_S: u64 = 24 * 3600;

/// The largest spool file loaded for another user (see [`Guard`]),
/// bytes: it is read whole into the loader's memory (what is checked is
/// what is loaded), and a job's result (its job record, summaries, flags
/// and analysis; the series is archived apart) is a few MiB at most on
/// thousands of nodes. A larger one, even a sparse file that costs its
/// owner nothing, is left alone with a message.
const MAX_GUARDED_FILE: u64 = 64 << 20;

/// The job id of a record (a string, or a number written as one).
fn job_id_of(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    match v.get("job_id")? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A top-level key given twice in a record, if any. The guard and the
/// store read the last (serde), SQLite's json_extract the first: a record
/// checked as the user's own job could show another's id to a reader of
/// the stored text.
fn twice_given_key(line: &str) -> Option<String> {
    struct Keys(Option<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> std::result::Result<Keys, A::Error> {
                    let mut seen = std::collections::HashSet::new();
                    let mut twice = None;
                    while let Some(k) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        if !seen.insert(k.clone()) && twice.is_none() {
                            twice = Some(k);
                        }
                    }
                    Ok(Keys(twice))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    serde_json::from_str::<Keys>(line).ok()?.0
}

impl Guard {
    fn check(
        &self,
        w: &hpc_db::Writer<'_>,
        kind: &str,
        line: &str,
    ) -> std::result::Result<Verdict, PutError> {
        if let Some(k) = twice_given_key(line) {
            return Err(PutError::Bad(format!(
                "the key {k} is given twice: readers of the stored record would differ on which one counts"
            )));
        }
        let Some(id) = job_id_of(line) else {
            return Err(PutError::Bad(format!(
                "a record without a job id: from {}'s spool only records of {}'s own jobs are taken",
                self.user, self.user
            )));
        };
        let owners = w.job_owners(&id)?;
        if owners.is_empty() {
            return Err(PutError::Bad(format!(
                "job {id} is not in the accounting data (sacct): from {}'s spool only records of jobs sacct says are {}'s are taken",
                self.user, self.user
            )));
        }
        if owners.iter().any(|o| *o != self.user) {
            return Err(PutError::Bad(format!(
                "job {id} belongs to {} in the accounting data (sacct), not to {}, whose spool this is",
                owners.join(", "),
                self.user
            )));
        }
        Ok(if kind == "job" {
            Verdict::Skip
        } else {
            Verdict::Take
        })
    }

    /// Whether every job `text` names is in the accounting data (a file
    /// that names one not there yet waits for the next harvest).
    fn all_known(&self, store: &Store, text: &str) -> hpc_db::Result<bool> {
        for id in text.lines().filter_map(job_id_of) {
            if store.job_owners(&id)?.is_empty() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// How a spool folder is loaded.
#[derive(Debug, Clone, Copy)]
pub struct SpoolOptions {
    /// A file whose last line is not complete is left for a later run until
    /// it is this old (seconds since its last change); then it is loaded and
    /// its cut last line reported.
    pub settle_s: u64,
}

/// Loads every finished `*.ndjson` file of a spool folder and moves it to
/// `DIR/done/` (or `DIR/rejected/` when some of its lines were rejected; its
/// good lines are loaded). Only regular files owned by the loading user are
/// read, opened without following links; anything else is reported and left
/// alone, and so is a file that cannot be read. Files whose name starts with a
/// dot are still being written and are skipped quietly, as is a file whose
/// last line is incomplete and younger than `settle_s`. A move never
/// replaces an earlier file of the same name: the new one gets a `.N`
/// suffix. A failure of the database stops the run and leaves the file
/// where it was.
pub fn put_spool(
    store: &mut Store,
    dir: &Path,
    opts: SpoolOptions,
    rejects: &mut Rejects,
) -> Result<PutReport> {
    // The folder is opened once, without following a link, and everything
    // after goes through that descriptor (/proc/self/fd/N): its owner is the
    // folder's own, and a folder swapped for another (or for a link to
    // another user's) after this is not the one read.
    let handle = open_folder(dir)?;
    let _lock = lock_spool(&handle, dir)?;
    let owner = spool_owner(&handle);
    let pinned = &PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&handle)
    ));
    {
        let _as_owner = AsOwner::of(&owner)?;
        unclaim_all(pinned, &handle, dir)?;
    }
    let mut names: Vec<PathBuf> = fs::read_dir(pinned)
        .ctx(|| format!("cannot read spool {}", shown(dir)))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "ndjson")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    names.sort();
    // Root over another user's spool: only that user's own jobs.
    let guard = match owner.uid {
        uid if nix::unistd::geteuid().is_root() && uid != 0 => {
            match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
                Ok(Some(u)) => Some(Guard { user: u.name }),
                _ => {
                    hpc_core::note!(
                        "hpc-store: {}: its owner (uid {uid}) has no user name: whose jobs its records may describe is unknown; left alone",
                        shown(dir)
                    );
                    return Ok(PutReport {
                        skipped: names.len() as u64,
                        ..Default::default()
                    });
                }
            }
        }
        _ => None,
    };
    let mut total = PutReport::default();
    for path in names {
        // Read through the pinned folder, named by the spool's own path.
        let source = dir.join(path.file_name().unwrap_or_default());
        let name = shown(&source);
        let source = source.to_string_lossy();
        if already_moved(&path, dir)? {
            continue;
        }
        // Its claim's name must fit a file name, or the file would be
        // loaded and then fail to move, on every run.
        if path
            .file_name()
            .is_some_and(|n| CLAIM_PREFIX.len() + n.len() > NAME_MAX)
        {
            hpc_core::note!(
                "hpc-store: {name}: a name over {} bytes cannot be moved once loaded (it becomes {CLAIM_PREFIX}NAME); rename it; left alone",
                NAME_MAX - CLAIM_PREFIX.len()
            );
            total.skipped += 1;
            continue;
        }
        let file = match open_spool_file(&path, opts.settle_s, owner.uid) {
            Ok(Some(f)) => f,
            Ok(None) => {
                total.waiting += 1;
                continue;
            }
            Err(why) => {
                hpc_core::note!("hpc-store: {name}: {why}; left alone");
                total.skipped += 1;
                continue;
            }
        };
        let before = rejects.rejected;
        let read = file.metadata().map(|m| identity(&m)).ok();
        let rep = match &guard {
            None => {
                let input = Input::new(&source, std::io::BufReader::new(file));
                put_reader(store, input, rejects)?
            }
            Some(g) => {
                // Read once: what is checked is what is loaded. At most
                // MAX_GUARDED_FILE, even when the file grows while read.
                let mut text = String::new();
                let read = if file.metadata().map_or(0, |m| m.len()) > MAX_GUARDED_FILE {
                    Ok(usize::MAX)
                } else {
                    std::io::Read::read_to_string(
                        &mut std::io::Read::take(&file, MAX_GUARDED_FILE + 1),
                        &mut text,
                    )
                };
                match read {
                    Err(e) => {
                        hpc_core::note!("hpc-store: {name}: cannot read: {e}; left alone");
                        total.skipped += 1;
                        continue;
                    }
                    Ok(n) if n as u64 > MAX_GUARDED_FILE => {
                        hpc_core::note!(
                            "hpc-store: {name}: over {} MiB, not a job's result; left alone",
                            MAX_GUARDED_FILE >> 20
                        );
                        total.skipped += 1;
                        continue;
                    }
                    Ok(_) => {}
                }
                let young = file
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok()?.elapsed().ok())
                    .is_some_and(|age| age.as_secs() < WAIT_FOR_SACCT_S);
                if young && !g.all_known(store, &text)? {
                    total.waiting += 1;
                    continue;
                }
                let input = Input::new(&source, text.as_bytes());
                put_guarded(store, input, rejects, Some(g))?
            }
        };
        let dest_dir = dir.join(if rejects.rejected > before {
            "rejected"
        } else {
            "done"
        });
        // The file moved is the one read, and it is moved by a name no
        // writer uses: the entry is first renamed to .loading.NAME (one
        // step), then what that name holds is checked and moved. A writer
        // that replaces NAME (hpc-finalize's mv -f) before the rename left a
        // new file: it is put back (loaded next run); after it, the new file
        // is NAME's and untouched. (Checked by NAME and then moved by NAME,
        // a file replaced between the two was moved unread or removed.)
        let _as_owner = AsOwner::of(&owner)?;
        let file_name = path.file_name().expect("a spool entry has a name");
        let claim = claim_path(&path);
        fs::rename(&path, &claim).ctx(|| format!("cannot rename {name} to claim it"))?;
        let claimed = fs::symlink_metadata(&claim).map(|m| identity(&m)).ok();
        if claimed.is_some() && claimed == read {
            if let Err(e) = move_no_clobber(&claim, &dest_dir, file_name) {
                // Left in place under its own name, as it was found.
                let _ = unclaim(&claim, &handle, dir, file_name);
                return Err(e);
            }
        } else {
            unclaim(&claim, &handle, dir, file_name)?;
            hpc_core::note!(
                "hpc-store: {name}: replaced while it was loaded; the new file is left for the next run"
            );
        }
        total += rep;
        total.files += 1;
    }
    Ok(total)
}

/// A file's device and inode: which file a name stands for.
fn identity(m: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

/// True (and the entry removed) when a run killed while moving this file
/// already linked it into `done/` or `rejected/`: it was loaded then.
fn already_moved(path: &Path, dir: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(false);
    };
    if !meta.is_file() || meta.nlink() < 2 {
        return Ok(false);
    }
    let name = path.file_name().expect("a spool entry has a name");
    for sub in ["done", "rejected"] {
        let there = dir.join(sub).join(name);
        if fs::symlink_metadata(&there)
            .is_ok_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev())
        {
            fs::remove_file(path)
                .ctx(|| format!("cannot remove {} (already in {sub}/)", shown(path)))?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whose spool files a run loads: the loading user's own; for root (the
/// admin's single loader, over each user's folder) those of the folder's
/// owner, who wrote them through the Epilog or the harvest's sweep.
struct SpoolOwner {
    uid: u32,
    gid: u32,
}

/// The group of an owner without a passwd entry (the kernel's overflow
/// gid, `nogroup`).
const OVERFLOW_GID: u32 = 65534;

fn spool_owner(folder: &fs::File) -> SpoolOwner {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid();
    match folder.metadata() {
        // The owner's own group, not the folder's: a folder root made and
        // gave to the user may still have group 0, and acting with it would
        // reach what root's group may write.
        Ok(m) if me.is_root() => SpoolOwner {
            uid: m.uid(),
            gid: nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(m.uid()))
                .ok()
                .flatten()
                .map_or(OVERFLOW_GID, |u| u.gid.as_raw()),
        },
        _ => SpoolOwner {
            uid: me.as_raw(),
            gid: nix::unistd::getegid().as_raw(),
        },
    }
}

/// Opens one spool entry: a regular file of `owner` (see [`SpoolOwner`]),
/// not through a link. `Ok(None)` when its last line is still incomplete
/// and it is younger than `settle_s`.
fn open_spool_file(
    path: &Path,
    settle_s: u64,
    owner: u32,
) -> std::result::Result<Option<fs::File>, String> {
    use nix::fcntl::OFlag;
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => {
                "a symbolic link, not a spool file".to_string()
            }
            _ => format!("cannot open: {e}"),
        })?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.uid() != owner {
        return Err(format!(
            "owned by uid {}, not by the loading user or the spool's owner ({owner})",
            meta.uid()
        ));
    }
    if meta.len() > 0 {
        let mut f = &file;
        let mut last = [0u8];
        f.seek(SeekFrom::End(-1))
            .and_then(|_| f.read_exact(&mut last))
            .and_then(|_| f.seek(SeekFrom::Start(0)))
            .map_err(|e| format!("cannot read: {e}"))?;
        let age = meta.modified().ok().and_then(|m| m.elapsed().ok());
        if last[0] != b'\n' && age.map_or(true, |a| a.as_secs() < settle_s) {
            return Ok(None);
        }
    }
    Ok(Some(file))
}

/// Moves `path` into the spool's folder `sub` under `name`, or `NAME.1`,
/// `NAME.2`, ... when that is taken: an earlier file is never replaced. The
/// folder is made 0700 when missing and is reached through a descriptor
/// opened without following links (the spool's owner may swap `sub` for a
/// link at any moment).
fn move_no_clobber(path: &Path, sub: &Path, name: &OsStr) -> Result<PathBuf> {
    let folder = open_subdir(sub)?;
    let dest = link_no_clobber(path, &folder, sub, name, |n| {
        let mut alt = name.to_os_string();
        alt.push(format!(".{n}"));
        alt
    })?;
    fs::remove_file(path).ctx(|| format!("cannot remove {} after moving it", shown(path)))?;
    Ok(sub.join(dest))
}

/// Puts a claimed file (see [`claim_path`]) back in the spool folder open
/// as `folder` (shown as `dir`) under `name`, or `STEM.1.ndjson`, ... when
/// a newer file took that name, so that the next run loads it.
fn unclaim(claim: &Path, folder: &fs::File, dir: &Path, name: &OsStr) -> Result<PathBuf> {
    let stem = Path::new(name).file_stem().unwrap_or(name).to_os_string();
    let dest = link_no_clobber(claim, folder, dir, name, |n| {
        let mut alt = stem.clone();
        alt.push(format!(".{n}.ndjson"));
        alt
    })?;
    fs::remove_file(claim)
        .ctx(|| format!("cannot remove {} after putting it back", shown(claim)))?;
    Ok(dir.join(dest))
}

/// Links `path` into `folder` (shown as `dir`) as `name`, else as the first
/// `alt(1)`, `alt(2)`, ... not taken; the name it got.
fn link_no_clobber(
    path: &Path,
    folder: &fs::File,
    dir: &Path,
    name: &OsStr,
    alt: impl Fn(u32) -> OsString,
) -> Result<PathBuf> {
    use nix::{fcntl::AtFlags, unistd::linkat};
    use std::os::fd::AsRawFd;
    let mut dest = PathBuf::from(name);
    for n in 1u32.. {
        match linkat(
            None,
            path,
            Some(folder.as_raw_fd()),
            &dest,
            AtFlags::empty(),
        ) {
            Ok(()) => break,
            Err(nix::errno::Errno::EEXIST) => dest = PathBuf::from(alt(n)),
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .ctx(|| format!("cannot move {} to {}", shown(path), shown(&dir.join(&dest))))
            }
        }
    }
    Ok(dest)
}

/// The name a spool file is moved by once loaded: `.loading.NAME` beside
/// it, which no writer uses (names that start with a dot are not loaded).
fn claim_path(path: &Path) -> PathBuf {
    let mut claim = OsString::from(CLAIM_PREFIX);
    claim.push(path.file_name().expect("a spool entry has a name"));
    path.with_file_name(claim)
}

/// See [`claim_path`].
const CLAIM_PREFIX: &str = ".loading.";
/// The longest file name, in bytes (Linux's NAME_MAX).
const NAME_MAX: usize = 255;

/// Puts back every file a killed run had claimed (see [`claim_path`]) under
/// its own name, to be loaded again (loading is idempotent).
fn unclaim_all(pinned: &Path, folder: &fs::File, dir: &Path) -> Result<()> {
    let entries = fs::read_dir(pinned).ctx(|| format!("cannot read spool {}", shown(dir)))?;
    for e in entries.filter_map(|e| e.ok()) {
        let file_name = e.file_name();
        let Some(name) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(CLAIM_PREFIX))
        else {
            continue;
        };
        if e.file_type().is_ok_and(|t| t.is_file()) && name.ends_with(".ndjson") {
            let back = unclaim(&e.path(), folder, dir, OsStr::new(name))?;
            hpc_core::note!(
                "hpc-store: {}: left claimed by a run that stopped; put back as {}",
                shown(&dir.join(&file_name)),
                shown(&back)
            );
        }
    }
    Ok(())
}

/// How long a loader waits for another that loads the same spool.
const SPOOL_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Locks the spool folder (`flock` on its descriptor) against a second
/// loader. Two at once could each claim a file (.loading.NAME) the other had
/// claimed, and a file replaced between the two claims went to done/ unread.
/// Waits [`SPOOL_LOCK_WAIT`], then leaves the spool to the other loader
/// (an error: the run says so, and nothing is lost). On a file system
/// without locks the spool is loaded unlocked, with a warning.
fn lock_spool(handle: &fs::File, dir: &Path) -> Result<Option<nix::fcntl::Flock<fs::File>>> {
    use nix::errno::Errno;
    use nix::fcntl::{Flock, FlockArg};
    let start = std::time::Instant::now();
    let mut fd = handle
        .try_clone()
        .ctx(|| format!("cannot lock spool {}", shown(dir)))?;
    loop {
        match Flock::lock(fd, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Some(lock)),
            Err((back, Errno::EWOULDBLOCK)) if start.elapsed() < SPOOL_LOCK_WAIT => {
                fd = back;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(Error::Other(format!(
                    "spool {}: another hpc-store is loading it (it holds the folder's lock); left to it",
                    shown(dir)
                )))
            }
            Err((_, e)) => {
                hpc_core::note!(
                    "hpc-store: cannot lock spool {} ({e}): a second loader at once would not be kept apart",
                    shown(dir)
                );
                return Ok(None);
            }
        }
    }
}

/// Opens a spool folder to load, refusing a link (whose owner is not the
/// folder's: a link to another user's folder must not get it read as
/// theirs) or anything but a folder.
fn open_folder(dir: &Path) -> Result<fs::File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(dir)
        .map_err(|e| {
            let link = fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
            let why = if link || e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
                "a symbolic link, not a spool folder (left alone)".to_string()
            } else {
                e.to_string()
            };
            Error::Other(format!("cannot read spool {}: {why}", shown(dir)))
        })
}

/// Opens the spool folder `sub` (made 0700 when missing), refusing a link
/// or anything but a folder.
fn open_subdir(sub: &Path) -> Result<fs::File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    match fs::DirBuilder::new().mode(0o700).create(sub) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(e).ctx(|| format!("cannot create {}", shown(sub)))
        }
        _ => {}
    }
    fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(sub)
        .map_err(|e| {
            let what = match fs::symlink_metadata(sub) {
                Ok(m) if m.file_type().is_symlink() => "is a symbolic link, not a folder",
                Ok(m) if !m.is_dir() => "is not a folder",
                _ => "cannot be opened as a folder",
            };
            Error::Other(format!(
                "{} {what} ({e}): the file loaded is left in place; remove or rename it",
                shown(sub)
            ))
        })
}

/// While alive, a root loader's file-system identity (this thread's) is
/// that of the owner of the user's spool folder it works in: the `done/`
/// and `rejected/` it makes are the owner's, and it reaches only what the
/// owner could, whatever the owner put in the folder. Nothing for a loader
/// that is not root, or in root's own folder.
struct AsOwner {
    uid: nix::unistd::Uid,
    gid: nix::unistd::Gid,
    /// Root's supplementary groups, set aside meanwhile: kept, they let the
    /// owner's paths reach folders that root's groups may write.
    groups: Vec<nix::unistd::Gid>,
}

impl AsOwner {
    /// Acts as `owner` (root only); an error when that could not be done
    /// wholly, with nothing changed.
    fn of(owner: &SpoolOwner) -> Result<Option<AsOwner>> {
        use nix::unistd::{getgroups, setfsgid, setfsuid, setgroups, Gid, Uid};
        if !nix::unistd::geteuid().is_root() || owner.uid == 0 {
            return Ok(None);
        }
        let fail = |what: &str, e: String| {
            Error::Other(format!(
                "cannot act as the spool's owner (uid {}): {what}: {e}",
                owner.uid
            ))
        };
        let groups = getgroups().map_err(|e| fail("reading root's groups", e.to_string()))?;
        setgroups(&[]).map_err(|e| fail("setting root's groups aside", e.to_string()))?;
        // Each returns the id before (kept: dropping `me` restores them all);
        // asked again, the one in force.
        let me = AsOwner {
            gid: setfsgid(Gid::from_raw(owner.gid)),
            uid: setfsuid(Uid::from_raw(owner.uid)),
            groups,
        };
        let (uid, gid) = (
            setfsuid(Uid::from_raw(owner.uid)),
            setfsgid(Gid::from_raw(owner.gid)),
        );
        if uid.as_raw() != owner.uid || gid.as_raw() != owner.gid {
            return Err(fail(
                "the file system ids did not change",
                format!("uid {uid}, gid {gid}"),
            ));
        }
        Ok(Some(me))
    }
}

impl Drop for AsOwner {
    fn drop(&mut self) {
        nix::unistd::setfsuid(self.uid);
        nix::unistd::setfsgid(self.gid);
        let _ = nix::unistd::setgroups(&self.groups);
    }
}

/// Writes the `status` lines.
pub fn status(store: &Store, path: &Path, out: &mut dyn Write) -> hpc_db::Result<()> {
    let c = store.status_counts()?;
    let stamp =
        |epoch: Option<i64>| epoch.map(|epoch| hpc_core::slurm::Timestamp { epoch }.to_rfc3339());
    let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        + fs::metadata(format!("{}-wal", path.display()))
            .map(|m| m.len())
            .unwrap_or(0);
    writeln!(out, "database: {}", hpc_core::paths::shown(path))?;
    writeln!(out, "schema version: {}", store.version()?)?;
    writeln!(out, "size: {:.1} MiB", size as f64 / 1048576.0)?;
    writeln!(
        out,
        "jobs: {} ({} final, {} running or pending)",
        c.jobs,
        c.final_jobs,
        c.jobs - c.final_jobs
    )?;
    writeln!(
        out,
        "date range: {} .. {}",
        stamp(c.first_submit).as_deref().unwrap_or("-"),
        stamp(c.last_end).as_deref().unwrap_or("-")
    )?;
    let pct = if c.ran > 0 {
        100.0 * c.with_rss as f64 / c.ran as f64
    } else {
        0.0
    };
    writeln!(
        out,
        "MaxRSS coverage: {} of {} finished jobs that ran ({pct:.1} %)",
        c.with_rss, c.ran
    )?;
    let states: Vec<String> = c.states.iter().map(|(s, n)| format!("{s} {n}")).collect();
    writeln!(
        out,
        "states: {}",
        if states.is_empty() {
            "-".into()
        } else {
            states.join(", ")
        }
    )?;
    for (name, n) in [
        ("summaries", c.summaries),
        ("flags", c.flags),
        ("samples", c.samples),
        ("other records", c.other_records),
    ] {
        writeln!(out, "{name}: {n}")?;
    }
    match store.mark("last_ingest")? {
        Some((v, at)) => writeln!(
            out,
            "last ingest: {} ({v})",
            hpc_core::slurm::Timestamp { epoch: at }.to_rfc3339()
        )?,
        None => writeln!(out, "last ingest: never")?,
    }
    Ok(())
}

pub use hpc_db::query::DUMP_KINDS;

/// Writes records back out as NDJSON ([`Store::dump_ndjson`]).
pub fn dump(
    store: &Store,
    kinds: &[String],
    filter: &JobFilter,
    out: &mut dyn Write,
) -> hpc_db::Result<u64> {
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    store.dump_ndjson(&kinds, filter, out)
}

/// `flags`: counts of each flag over the filtered jobs, or (with `jobs`)
/// the flagged jobs themselves.
pub fn store_flags(
    store: &Store,
    filter: &JobFilter,
    jobs: bool,
    format: report::Format,
    out: &mut dyn Write,
) -> hpc_db::Result<()> {
    use report::Cell;
    let (cols, rows): (&[&str], Vec<Vec<Cell>>) = if jobs {
        let rows = store
            .job_flags(filter)?
            .into_iter()
            .map(|f| {
                vec![
                    Cell::Text(f.job_id),
                    Cell::Text(f.user.unwrap_or_else(|| "-".into())),
                    Cell::Text(f.flag),
                    Cell::Num(f.value, 2),
                    Cell::Num(f.threshold, 2),
                    Cell::Text(f.reason),
                ]
            })
            .collect();
        (
            &["job_id", "user", "flag", "value", "threshold", "reason"],
            rows,
        )
    } else {
        let rows = store
            .flag_counts(filter)?
            .into_iter()
            .map(|f| {
                vec![
                    Cell::Text(f.flag),
                    Cell::Text(f.category),
                    Cell::Num(Some(f.jobs as f64), 0),
                    Cell::Num(Some(f.users as f64), 0),
                ]
            })
            .collect();
        (&["flag", "category", "jobs", "users"], rows)
    };
    Ok(report::write_table(out, "flag_count", cols, &rows, format)?)
}

/// `history`: the distribution of peak memory, CPU efficiency and elapsed
/// time over the finished jobs of one tool.
pub fn history(
    store: &Store,
    tool: &str,
    filter: &JobFilter,
    format: report::Format,
    out: &mut dyn Write,
) -> hpc_db::Result<()> {
    use report::{quantile, Cell};
    let h = store.tool_history(tool, filter)?;
    let series = [h.max_rss_mb, h.cpu_eff, h.elapsed_s, h.req_mem_mb];
    let names = ["peak_rss_mb", "cpu_eff", "elapsed_s", "req_mem_mb"];
    let mut table = Vec::new();
    for (name, mut s) in names.iter().zip(series) {
        s.sort_by(f64::total_cmp);
        let mean = (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64);
        let mut row = vec![
            Cell::Text(tool.to_string()),
            Cell::Text(name.to_string()),
            Cell::Num(Some(s.len() as f64), 0),
        ];
        for q in [0.0, 0.1, 0.5, 0.9, 1.0] {
            row.push(Cell::Num(quantile(&s, q), 1));
        }
        row.push(Cell::Num(mean, 1));
        table.push(row);
    }
    Ok(report::write_table(
        out,
        "history",
        &[
            "tool", "metric", "n", "min", "p10", "p50", "p90", "max", "mean",
        ],
        &table,
        format,
    )?)
}
