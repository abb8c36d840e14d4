//! The language table and how a batch script's language is found: the
//! shebang, interpreter calls (`Rscript`, `python3.11`, `julia`, ...), the
//! script files it runs (`analysis.R`), `module load` lines, and the tool
//! found.

/// One language: the commands that run it, the module names that provide
/// it and the extensions of its scripts.
#[derive(Debug)]
pub struct Lang {
    /// The name written in the `analysis` record.
    pub name: &'static str,
    /// Interpreter commands; a version may follow (`python3.11`).
    interpreters: &'static [&'static str],
    /// Module names, lower case; a version or suffix may follow after a
    /// non-letter (`R/4.3`, `R-bundle-Bioconductor`, `anaconda3`).
    modules: &'static [&'static str],
    /// Script file extensions, lower case.
    pub extensions: &'static [&'static str],
}

/// The languages known, in no particular order.
pub const LANGS: &[Lang] = &[
    Lang {
        name: "R",
        interpreters: &["Rscript", "R"],
        modules: &["r"],
        extensions: &[".r"],
    },
    Lang {
        name: "Python",
        interpreters: &["python", "pypy"],
        modules: &["python", "anaconda", "miniconda", "miniforge", "conda"],
        extensions: &[".py"],
    },
    Lang {
        name: "Julia",
        interpreters: &["julia"],
        modules: &["julia"],
        extensions: &[".jl"],
    },
    Lang {
        name: "MATLAB",
        interpreters: &["matlab"],
        modules: &["matlab"],
        extensions: &[".m"],
    },
    Lang {
        name: "Perl",
        interpreters: &["perl"],
        modules: &["perl"],
        extensions: &[".pl"],
    },
    Lang {
        name: "Java",
        interpreters: &["java"],
        modules: &["java", "openjdk"],
        extensions: &[".jar"],
    },
];

/// Shells a batch script may be written in; all count as `bash`.
const SHELLS: &[&str] = &["sh", "bash", "dash", "ksh", "zsh"];

/// True when `word` is `name` followed by nothing or by what `rest_ok`
/// accepts for every remaining character.
fn named(word: &str, name: &str, rest_ok: fn(char) -> bool) -> bool {
    word.strip_prefix(name)
        .is_some_and(|rest| rest.chars().all(rest_ok))
}

/// The language whose interpreter `word` (a command, maybe with a path) is.
pub fn by_interpreter(word: &str) -> Option<&'static Lang> {
    let base = word.rsplit('/').next().unwrap_or(word);
    LANGS.iter().find(|l| {
        l.interpreters
            .iter()
            .any(|i| named(base, i, |c| c.is_ascii_digit() || c == '.'))
    })
}

/// The language a module (`R/4.3`, `Python/3.11.3-GCCcore-12.3.0`,
/// `anaconda3`) provides.
pub fn by_module(module: &str) -> Option<&'static Lang> {
    let name = module.split('/').next().unwrap_or(module).to_lowercase();
    LANGS.iter().find(|l| {
        l.modules.iter().any(|m| {
            name.strip_prefix(m)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphabetic()))
        })
    })
}

/// The language of a script file from its extension.
pub fn by_extension(path: &str) -> Option<&'static Lang> {
    let lower = path.to_lowercase();
    LANGS.iter().find(|l| {
        l.extensions
            .iter()
            .any(|e| lower.ends_with(e) && lower.len() > e.len())
    })
}

/// The interpreter a shebang line names (`#!/usr/bin/env python3` gives
/// `python3`), when the line is one.
pub fn shebang(first_line: &str) -> Option<&str> {
    let mut words = first_line.strip_prefix("#!")?.split_whitespace();
    let cmd = words.next()?;
    let base = cmd.rsplit('/').next().unwrap_or(cmd);
    if base == "env" {
        return words.find(|w| !w.starts_with('-') && !w.contains('='));
    }
    Some(base)
}

/// True when a shebang's interpreter is a shell.
pub fn is_shell(interpreter: &str) -> bool {
    SHELLS.contains(&interpreter)
}

/// The modules a `module load A B` / `module add` / `ml A` line loads.
pub fn modules_loaded(words: &[&str]) -> Vec<String> {
    let args = match words {
        ["module", "load" | "add", rest @ ..] => rest,
        ["ml", rest @ ..] => rest,
        _ => return Vec::new(),
    };
    args.iter()
        .filter(|w| !w.starts_with('-'))
        .map(|w| w.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(l: Option<&Lang>) -> Option<&str> {
        l.map(|l| l.name)
    }

    #[test]
    fn interpreters_with_versions_and_paths() {
        assert_eq!(name(by_interpreter("Rscript")), Some("R"));
        assert_eq!(name(by_interpreter("/usr/bin/python3.11")), Some("Python"));
        assert_eq!(name(by_interpreter("julia")), Some("Julia"));
        assert_eq!(name(by_interpreter("matlab")), Some("MATLAB"));
        assert_eq!(name(by_interpreter("Rsomething")), None);
        assert_eq!(name(by_interpreter("pythonista")), None);
    }

    #[test]
    fn modules_with_versions_and_bundles() {
        assert_eq!(name(by_module("R/4.3")), Some("R"));
        assert_eq!(name(by_module("R-bundle-Bioconductor/3.16")), Some("R"));
        assert_eq!(
            name(by_module("Python/3.11.3-GCCcore-12.3.0")),
            Some("Python")
        );
        assert_eq!(name(by_module("anaconda3/2023.09")), Some("Python"));
        assert_eq!(name(by_module("MATLAB/R2023b")), Some("MATLAB"));
        assert_eq!(name(by_module("rust/1.80")), None);
        assert_eq!(name(by_module("samtools/1.17")), None);
    }

    #[test]
    fn shebangs() {
        assert_eq!(shebang("#!/bin/bash -l"), Some("bash"));
        assert_eq!(shebang("#!/usr/bin/env -S python3 -u"), Some("python3"));
        assert_eq!(shebang("#SBATCH -c 1"), None);
        assert!(is_shell("sh") && !is_shell("Rscript"));
    }

    #[test]
    fn module_lines() {
        assert_eq!(
            modules_loaded(&["module", "load", "R/4.3", "gcc"]),
            ["R/4.3", "gcc"]
        );
        assert_eq!(modules_loaded(&["ml", "julia"]), ["julia"]);
        assert!(modules_loaded(&["module", "purge"]).is_empty());
    }
}
