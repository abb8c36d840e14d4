//! The command the probe runs (`hpc-probe -- CMD`), which never outlives it.
//!
//! The command gets `PR_SET_PDEATHSIG` = `SIGKILL`, so the kernel kills it
//! when the probe dies in any way, `SIGKILL` included. It also runs in its
//! own process group (unless the probe's standard input is a terminal, where
//! an interactive command needs the terminal's foreground group), and on
//! every exit of the probe before the command ended (a signal, an error, a
//! closed pipe) the group is sent `SIGTERM`, then `SIGKILL` after
//! [`GRACE`].

use std::io::IsTerminal;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use hpc_core::{Error, IoContext, Result};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// How long the command has to exit after `SIGTERM` before its process
/// group is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// A running command; dropping it stops the command unless it was reaped.
pub struct RunningCommand {
    child: Child,
    group: bool,
    reaped: bool,
}

/// How a command that could not be started is named in its error (the
/// probe then exits 127 or 126, see `run`).
pub const CANNOT_RUN: &str = "cannot run";

impl RunningCommand {
    /// Starts `argv` (at least one word).
    // `pre_exec` is unsafe because its closure runs between fork and exec,
    // where only async-signal-safe work is allowed. Ours makes two system
    // calls (prctl, getppid), allocates nothing and takes no lock.
    #[allow(unsafe_code)]
    pub fn start(argv: &[String]) -> Result<Self> {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        let group = !std::io::stdin().is_terminal();
        if group {
            cmd.process_group(0);
        }
        let parent = nix::unistd::getpid();
        // SAFETY: see above; the closure only calls prctl(2) and getppid(2)
        // and builds its error from a raw errno (no allocation).
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The probe died before prctl took effect: do not run.
                if nix::unistd::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| Error::Io {
            context: format!("{CANNOT_RUN} {}", hpc_core::paths::escaped(&argv[0])),
            source,
        })?;
        Ok(RunningCommand {
            child,
            group,
            reaped: false,
        })
    }

    /// The command's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The command's exit status once it has ended (it is then reaped).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        let st = self
            .child
            .try_wait()
            .ctx(|| "cannot wait for the command".into())?;
        self.reaped |= st.is_some();
        Ok(st)
    }

    fn signal(&self, sig: Signal) {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = if self.group {
            killpg(pid, sig)
        } else {
            kill(pid, sig)
        };
    }

    /// Sends `SIGTERM` to the command's group, waits up to [`GRACE`] for
    /// the command to exit, then sends `SIGKILL`; reaps it. Nothing when the
    /// command already ended.
    pub fn stop(&mut self) {
        if self.reaped {
            return;
        }
        self.signal(Signal::SIGTERM);
        let end = Instant::now() + GRACE;
        while Instant::now() < end {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    self.reaped = true;
                    return;
                }
            }
        }
        self.signal(Signal::SIGKILL);
        let _ = self.child.wait();
        self.reaped = true;
    }
}

impl Drop for RunningCommand {
    fn drop(&mut self) {
        self.stop();
    }
}
