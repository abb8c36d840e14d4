//! Command-line parsing shared by the tools.

use std::io::Write;
use std::process::ExitCode;

use crate::error::Exit;

/// Parses the command line like `argh::from_env`, except that a usage error
/// exits 2 (the project's usage code, not argh's 1), `--help` prints to
/// stdout and exits 0, and a lone `-` (stdin) is accepted as a positional
/// argument even before `--`.
pub fn parse_args<T: argh::FromArgs>(default_name: &str) -> Result<T, ExitCode> {
    // args() panics on an argument that is not UTF-8 (a file name in
    // Latin-1): a usage error here, naming it escaped.
    let mut argv: Vec<String> = Vec::new();
    for a in std::env::args_os() {
        match a.into_string() {
            Ok(a) => argv.push(a),
            Err(bad) => {
                crate::note!(
                    "{default_name}: argument '{}' is not UTF-8 (rename the file, or pass it on standard input)",
                    crate::paths::escaped(&bad.to_string_lossy())
                );
                return Err(crate::error::Exit::Usage.into());
            }
        }
    }
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
    let rest = dashes_as_files::<T>(cmd, args);
    T::from_args(&[cmd], &rest).map_err(|e| match e.status {
        Ok(()) => match writeln!(out, "{}", e.output.trim_end()).and_then(|()| out.flush()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                crate::note!("{cmd}: cannot write the help: {err}");
                Exit::Failure.into()
            }
        },
        Err(()) => {
            // argh's message may take more than one line: a note each.
            for line in e.output.trim_end().lines() {
                crate::note!("{cmd}: {line}");
            }
            Exit::Usage.into()
        }
    })
}

/// The arguments with every lone `-` that stands for stdin moved behind a
/// `--`, with the positional arguments after it, so that argh (which reads
/// a lone `-` as an unknown option) takes it as a file and the files keep
/// the order given: `a - b --x` becomes `--x -- - b` after `a`. Options
/// and their values stay in front, and a `-` that is an option's value
/// (`--delimiter -`) stays a value; whether an option takes a value is
/// asked of `T` itself.
fn dashes_as_files<'a, T: argh::FromArgs>(cmd: &str, args: &[&'a str]) -> Vec<&'a str> {
    let end = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let (mut front, mut back) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < end {
        let a = args[i];
        if a.starts_with('-') && a != "-" {
            front.push(a);
            if i + 1 < end && takes_value::<T>(cmd, &front) {
                front.push(args[i + 1]);
                i += 1;
            }
        } else if a == "-" || !back.is_empty() {
            back.push(a);
        } else {
            front.push(a);
        }
        i += 1;
    }
    if back.is_empty() {
        return args.to_vec();
    }
    front.push("--");
    front.extend(back);
    front.extend(args.get(end + 1..).unwrap_or_default());
    front
}

/// Whether the last of `args`, an option, takes a value: argh says so when
/// it is given none.
fn takes_value<T: argh::FromArgs>(cmd: &str, args: &[&str]) -> bool {
    let Some(opt) = args.last() else {
        return false;
    };
    T::from_args(&[cmd], args).is_err_and(|e| {
        e.output
            .contains(&format!("No value provided for option '{opt}'"))
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
        /// a value
        #[argh(option)]
        set: Vec<String>,
        /// files
        #[argh(positional)]
        files: Vec<String>,
    }

    // Issue 9: a lone `-` was moved behind the other files, so stdin was
    // read last whatever its place.
    #[test]
    fn files_and_stdin_keep_their_order() {
        let a: A = parse_from("t", &["a", "-", "b"]).unwrap();
        assert_eq!(a.files, ["a", "-", "b"]);
        let a: A = parse_from(
            "t",
            &["--set", "-", "a", "-", "--x", "b", "--set", "v", "c"],
        )
        .unwrap();
        assert_eq!(a.files, ["a", "-", "b", "c"]);
        assert_eq!(a.set, ["-", "v"]);
        assert!(a.x);
        let a: A = parse_from("t", &["-", "a", "--", "--b"]).unwrap();
        assert_eq!(a.files, ["-", "a", "--b"]);
        let a: A = parse_from("t", &["--set", "-"]).unwrap();
        assert_eq!(
            (a.set, a.files),
            (vec!["-".to_string()], Vec::<String>::new())
        );
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
