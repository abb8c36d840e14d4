//! Command-line parsing shared by the tools.

use std::io::Write;
use std::process::ExitCode;

use crate::error::Exit;

/// Parses the command line like `argh::from_env`, except that a usage error
/// exits 2 (the project's usage code, not argh's 1), `--help` prints to
/// stdout and exits 0, and a lone `-` (stdin) is accepted as a positional
/// argument even before `--`.
pub fn parse_args<T: argh::FromArgs>(default_name: &str) -> Result<T, ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    let cmd = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_else(|| default_name.into());
    let rest: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
    parse_from(&cmd, &rest)
}

/// [`parse_args`] over given arguments (for tests).
pub fn parse_from<T: argh::FromArgs>(cmd: &str, args: &[&str]) -> Result<T, ExitCode> {
    parse_to(cmd, args, &mut std::io::stdout().lock())
}

/// [`parse_from`] with the help written to `out`. Help that cannot be
/// written (`--help >/dev/full`) is a failure (exit 1), not a success.
fn parse_to<T: argh::FromArgs>(
    cmd: &str,
    args: &[&str],
    out: &mut dyn Write,
) -> Result<T, ExitCode> {
    // A `-` that is an option's value (`--from -`) parses as given.
    if let Ok(t) = T::from_args(&[cmd], args) {
        return Ok(t);
    }
    let mut rest: Vec<&str> = args.to_vec();
    // argh takes a lone `-` for an unknown option: move it after `--`.
    let before = rest.iter().position(|a| *a == "--").unwrap_or(rest.len());
    if rest[..before].contains(&"-") {
        rest = rest[..before]
            .iter()
            .copied()
            .filter(|a| *a != "-")
            .chain(["--", "-"])
            .chain(rest[before..].iter().copied().skip(1))
            .collect();
    }
    T::from_args(&[cmd], &rest).map_err(|e| match e.status {
        Ok(()) => match writeln!(out, "{}", e.output.trim_end()).and_then(|()| out.flush()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                crate::note!("{cmd}: cannot write the help: {err}");
                Exit::Failure.into()
            }
        },
        Err(()) => {
            crate::note!("{cmd}: {}", e.output.trim_end());
            Exit::Usage.into()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(argh::FromArgs, Debug)]
    /// test
    struct A {
        /// a switch
        #[argh(switch)]
        x: bool,
        /// an input
        #[argh(option)]
        from: Option<String>,
        /// files
        #[argh(positional)]
        files: Vec<String>,
    }

    #[test]
    fn lone_dash_is_a_file() {
        let a: A = parse_from("t", &["-", "--x"]).unwrap();
        assert!(a.x);
        assert_eq!(a.files, vec!["-"]);
        assert!(parse_from::<A>("t", &["--nope"]).is_err());
    }

    #[test]
    fn lone_dash_as_an_option_value_stays_the_value() {
        let a: A = parse_from("t", &["--from", "-", "--x"]).unwrap();
        assert_eq!(a.from.as_deref(), Some("-"));
        assert!(a.x && a.files.is_empty());
    }

    /// A writer that is always full, like `/dev/full`.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(28))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn help_that_cannot_be_written_fails() {
        let mut ok = Vec::new();
        let r = parse_to::<A>("t", &["--help"], &mut ok);
        assert_eq!(r.unwrap_err(), ExitCode::SUCCESS);
        assert!(String::from_utf8(ok).unwrap().contains("a switch"));
        let r = parse_to::<A>("t", &["--help"], &mut Full);
        assert_eq!(r.unwrap_err(), ExitCode::from(Exit::Failure));
    }
}
