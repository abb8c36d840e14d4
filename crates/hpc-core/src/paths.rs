//! Where things live by default, and private, atomic file writes.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// The data folder: `$XDG_DATA_HOME/hpc-sizer` (an absolute path, as the
/// XDG base directory rules ask), else `~/.local/share/hpc-sizer`, home
/// being `HOME`, else the user's home in the password database (cron,
/// `env -i`). Never the current folder: a history made there is lost to
/// every later run from elsewhere.
pub fn data_dir() -> PathBuf {
    xdg_dir("XDG_DATA_HOME", ".local/share")
        .unwrap_or_else(|| PathBuf::from("/nonexistent/.local/share"))
        .join("hpc-sizer")
}

/// `$VAR` when it is an absolute path (the XDG rules ignore a relative
/// one), else `home/rest`, home being `HOME`, else the user's home in the
/// password database.
fn xdg_dir(var: &str, rest: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|v| v.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| passwd().map(|u| u.dir))
                .map(|h| h.join(rest))
        })
}

/// The user the tools act for: `USER` when set, else the name of the uid
/// (cron and systemd jobs run without `USER`), else the uid itself.
pub fn user_name() -> String {
    if let Some(u) = std::env::var("USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    passwd().map_or_else(|| nix::unistd::getuid().to_string(), |u| u.name)
}

/// The caller's entry in the password database, when it has one.
fn passwd() -> Option<nix::unistd::User> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
}

/// The database path: the flag, else `HPC_SIZER_DB`, else the data folder's `hpc-sizer.db`.
pub fn db_path(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_path_buf();
    }
    match std::env::var_os("HPC_SIZER_DB").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => data_dir().join("hpc-sizer.db"),
    }
}

/// The spool folder: the flag, else `HPC_SIZER_SPOOL`, else the data folder's `spool`.
pub fn spool_dir(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_path_buf();
    }
    match std::env::var_os("HPC_SIZER_SPOOL").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => data_dir().join("spool"),
    }
}

/// The user-to-group mapping file of the reports by group, when there is
/// one: the flag, else `HPC_SIZER_GROUPS`, else `hpc-sizer/groups` in
/// `XDG_CONFIG_HOME` (or `~/.config`) when that file exists.
pub fn groups_path(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("HPC_SIZER_GROUPS").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let p = xdg_dir("XDG_CONFIG_HOME", ".config")?.join("hpc-sizer/groups");
    p.exists().then_some(p)
}

/// A path as it may be shown in a message: control characters (a newline, an
/// escape code in a file name) and invalid UTF-8 are printed escaped, so a
/// crafted name cannot forge lines or drive the terminal.
pub fn shown(path: &Path) -> String {
    escaped(&path.to_string_lossy())
}

/// A user-controlled string made safe for a one-line message: control
/// characters become `\n`, `\t`, `\u{1b}` and the like; the rest is kept.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Creates a folder and its parents, new ones with mode 0700.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ctx(|| format!("cannot create {}", dir.display()))
}

/// Creates a new file for writing with mode 0600, never through a link nor
/// over a file already there (O_EXCL): one left at the name (a crashed run
/// of the same pid, or a link planted in a folder others may write) is
/// removed, the link itself and not what it names, and the create tried
/// once more.
fn create_new_private(path: &Path) -> Result<fs::File> {
    let open = || {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
    };
    let f = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::remove_file(path).ctx(|| format!("cannot remove {}", path.display()))?;
            open()
        }
        r => r,
    };
    f.ctx(|| format!("cannot create {}", path.display()))
}

/// Creates `path` empty with mode 0600 where nothing is there (following a
/// symlink to a missing file, as open(2) does). A file already there, or
/// one another process creates at the same moment, is left as it is:
/// never truncated, never re-moded. (A look for the file followed by a
/// truncating create let a second writer of a new database empty the pages
/// the first had begun.)
pub fn create_private_if_missing(path: &Path) -> Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .ctx(|| match path.exists() {
            // A read-only history is no "cannot create".
            true => format!("cannot open {} for writing", shown(path)),
            false => format!("cannot create {}", shown(path)),
        })?;
    Ok(())
}

/// Writes a file atomically: the bytes go to a private temporary file beside
/// `path`, which is synced and renamed over it. A reader sees the old file or
/// the new one, never half of it.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(d) = dir {
        create_private_dir(d)?;
    }
    // The temporary name holds at most TMP_STEM bytes of the file's own: a
    // name near the 255-byte limit (a script's long name) would not fit
    // with the dot and the suffix.
    const TMP_STEM: usize = 200;
    let mut tmp_name = std::ffi::OsString::from(".");
    {
        use std::os::unix::ffi::OsStrExt;
        let name = path.file_name().map_or(&b"out"[..], |n| n.as_bytes());
        tmp_name.push(std::ffi::OsStr::from_bytes(
            &name[..name.len().min(TMP_STEM)],
        ));
    }
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let f = create_new_private(&tmp)?;
        let mut w = std::io::BufWriter::new(f);
        // A bare i/o failure of the writer (a full disk) names the file.
        write(&mut w).map_err(|e| match e {
            Error::Io { context, source } if context == crate::error::BARE_IO => Error::Io {
                context: format!("cannot write {}", shown(path)),
                source,
            },
            e => e,
        })?;
        let f = w
            .into_inner()
            .map_err(|e| e.into_error())
            .ctx(|| format!("cannot write {}", tmp.display()))?;
        f.sync_all()
            .ctx(|| format!("cannot sync {}", tmp.display()))?;
        fs::rename(&tmp, path).ctx(|| format!("cannot rename to {}", path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_failed_write_names_the_file_and_leaves_no_temporary() {
        // /dev/full is a disk that is always full: "hpc-plot: i/o: No
        // space left on device" named no file.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.png");
        let e = write_atomic(&p, |w: &mut dyn Write| {
            w.write_all(b"x")?;
            let mut full = fs::OpenOptions::new().write(true).open("/dev/full")?;
            full.write_all(b"x")?;
            Ok(full.flush()?)
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot write") && e.contains("out.png"), "{e}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_whose_name_is_near_the_limit_is_written_atomically() {
        // 250 bytes: its temporary name once had 255 + 5 + the pid's.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(format!("{}.sbatch", "é".repeat(121)));
        assert_eq!(p.file_name().unwrap().len(), 249);
        write_atomic(&p, |w: &mut dyn Write| Ok(w.write_all(b"x\n")?)).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"x\n");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn a_private_file_made_if_missing_never_truncates_one_already_there() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.db");
        create_private_if_missing(&p).unwrap();
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Another writer's file, begun between our look and our create.
        fs::write(&p, b"SQLite format 3\0 and its pages").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        create_private_if_missing(&p).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"SQLite format 3\0 and its pages");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let missing = dir.path().join("no/such/dir/h.db");
        let err = create_private_if_missing(&missing).unwrap_err().to_string();
        assert!(err.contains("cannot create"), "{err}");
    }

    #[test]
    fn an_atomic_write_never_writes_through_a_link_at_its_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let p = dir.path().join("out.ndjson");
        let tmp = dir
            .path()
            .join(format!(".out.ndjson.tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        write_atomic(&p, |w| Ok(w.write_all(b"new\n")?)).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        assert!(!tmp.exists() && fs::symlink_metadata(&tmp).is_err());
    }

    #[test]
    fn atomic_write_is_private_and_complete() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/out.ndjson");
        write_atomic(&p, |w| Ok(w.write_all(b"hello\n")?)).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "hello\n");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = fs::metadata(p.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);
        // A failed write leaves the old file and no temporary behind.
        let r = write_atomic(&p, |_| Err(crate::Error::Other("boom".into())));
        assert!(r.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "hello\n");
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn shown_escapes_control_characters() {
        assert_eq!(
            shown(Path::new("a\nb\x1b[31m.ndjson")),
            "a\\nb\\u{1b}[31m.ndjson"
        );
        assert_eq!(escaped("plain é"), "plain é");
    }

    #[test]
    fn flag_beats_environment() {
        let p = db_path(Some(Path::new("/x/y.db")));
        assert_eq!(p, PathBuf::from("/x/y.db"));
    }
}
