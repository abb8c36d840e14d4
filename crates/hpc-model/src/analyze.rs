//! `hpc-model analyze`: reads a batch script, and the R, Python, Julia, ...
//! scripts it runs, without running anything, and writes one `analysis`
//! record: the `#SBATCH` request, the language, the tools found, the input
//! files named (sized by `stat` only, never opened) and the script's SHA-256.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use argh::FromArgs;
use hpc_core::advice::{Analysis, InputFile};
use hpc_core::paths::shown;
use hpc_core::{Error, IoContext, Result};
use sha2::{Digest, Sha256};

use crate::lang;
use crate::sbatch;
use crate::tools::ToolTable;

/// The largest script read: SLURM's default `max_script_size` (4 MiB).
const MAX_SCRIPT_BYTES: u64 = 4 << 20;

#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    name = "analyze",
    example = "hpc-model analyze job.sbatch",
    example = "hpc-model analyze --tools my-tools.csv job.sbatch | hpc-model recommend -",
    note = "Never runs the script. Exit status: 0 success, 1 a script that cannot be read or a bad #SBATCH value (the line is named), 2 usage error."
)]
/// Read a batch script (and the script it runs) and print one analysis
/// record: the #SBATCH request, language, tools, inputs with sizes, SHA-256.
pub struct AnalyzeArgs {
    /// a CSV file of more tools and file types (same columns as the
    /// built-in table, see the man page); its rows replace built-in rows of
    /// the same name
    #[argh(option)]
    tools: Option<PathBuf>,
    /// the batch script
    #[argh(positional)]
    script: PathBuf,
}

/// Runs `hpc-model analyze`.
pub fn main_with(args: AnalyzeArgs) -> Result<()> {
    let mut table = ToolTable::builtin();
    if let Some(path) = &args.tools {
        table.extend(ToolTable::load(path)?);
    }
    let analysis = analyze(&args.script, &table)?;
    let mut buf = Vec::with_capacity(1024);
    hpc_core::record::tag_into(&mut buf, "analysis", &analysis)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}

/// A script read with where it lies.
struct Source {
    text: String,
    dir: PathBuf,
}

/// Reads a batch script (and the R or Python script it runs) without
/// running anything.
pub fn analyze(script: &Path, table: &ToolTable) -> Result<Analysis> {
    analyze_bytes(script, read_capped(script, false)?, table)
}

/// [`analyze`] of a batch script already read (from a pipe, which cannot
/// be read twice); `script` names it and is where the scripts it runs are
/// looked for.
pub fn analyze_bytes(script: &Path, bytes: Vec<u8>, table: &ToolTable) -> Result<Analysis> {
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let request = sbatch::parse_directives(&text)
        .map_err(|e| Error::Other(format!("{}: line {}: {}", shown(script), e.line, e.reason)))?;
    let dir = script
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let batch = Source { text, dir };
    let mut sources = vec![&batch];
    let run: Vec<Source> = run_scripts(&batch)
        .into_iter()
        .filter_map(|p| {
            let text = String::from_utf8_lossy(&read_capped(&p, true).ok()?).into_owned();
            Some(Source {
                text,
                dir: batch.dir.clone(),
            })
        })
        .collect();
    sources.extend(run.iter());
    let tools = tools_found(&sources, table);
    let tool = table.primary(&tools);
    let language = language(
        &batch.text,
        table.tool(&tool).and_then(|t| t.language.clone()),
    );
    let inputs = inputs_found(&sources, table);
    let sized: Vec<f64> = inputs.iter().filter_map(|i| i.size_mb).collect();
    let input_mb = (!sized.is_empty()).then(|| hpc_core::num::round6(sized.iter().sum()));
    Ok(Analysis {
        job_id: None,
        user: None,
        script: script.to_string_lossy().into_owned(),
        script_sha256: sha256_hex(&bytes),
        request,
        language,
        tools,
        tool,
        inputs,
        input_mb,
    })
}

/// The bytes of a script of at most [`MAX_SCRIPT_BYTES`]. The batch script
/// may be a pipe (`/dev/stdin`, `<(...)`); a script it runs must be a
/// regular file, checked before it is opened, so that a FIFO named in a
/// script cannot block the analysis.
pub(crate) fn read_capped(path: &Path, regular_only: bool) -> Result<Vec<u8>> {
    let what = || format!("cannot read {}", shown(path));
    let meta = fs::metadata(path).ctx(what)?;
    if meta.is_dir() || (regular_only && !meta.is_file()) {
        return Err(Error::Other(format!("{}: not a regular file", shown(path))));
    }
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ctx(what)?
        .take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .ctx(what)?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(Error::Other(format!(
            "{}: larger than {MAX_SCRIPT_BYTES} bytes (SLURM's default max_script_size): not a script",
            shown(path)
        )));
    }
    Ok(bytes)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The lines that are code: not blank, not comments (`#`, which covers
/// `#SBATCH` and the shebang).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| sbatch::is_command(l))
}

/// Characters that end a word when scanning code for names.
fn is_separator(c: char) -> bool {
    c.is_whitespace() || "'\"`(),;=<>|&[]".contains(c)
}

/// The words of a line with their byte offsets.
fn words(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (is_separator(c), start) {
            (true, Some(s)) => {
                out.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &line[s..]));
    }
    out
}

/// Where a path written in a script lies: as it is when absolute, else in
/// the script's folder or the current one, whichever has it (the script's
/// folder when neither does). `~/` is the home folder; a path with `$` or a
/// glob is not resolved.
fn resolve(written: &str, dir: &Path) -> Option<PathBuf> {
    if written.contains(['$', '*', '?']) {
        return None;
    }
    if let Some(rest) = written.strip_prefix("~/") {
        return std::env::var_os("HOME").map(|h| Path::new(&h).join(rest));
    }
    let p = Path::new(written);
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    let here = dir.join(p);
    if here.exists() || !p.exists() {
        Some(here)
    } else {
        Some(p.to_path_buf())
    }
}

/// The script files the batch script runs (`Rscript x.R`, `python a.py`,
/// `./run.jl`), resolved; those that are not readable are left out later.
fn run_scripts(batch: &Source) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in code_lines(&batch.text) {
        for (_, w) in words(line) {
            if lang::by_extension(w).is_some() && !w.contains("://") {
                if let Some(p) = resolve(w, &batch.dir) {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// Every tool named in the code lines of the sources, in the order found.
fn tools_found(sources: &[&Source], table: &ToolTable) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in sources.iter().flat_map(|s| code_lines(&s.text)) {
        for name in table.tools_in(line) {
            if !found.iter().any(|f| f == name) {
                found.push(name.to_string());
            }
        }
    }
    found
}

/// The language of a batch script, from (in this order) a shebang naming an
/// interpreter, the first interpreter call, the first script file run, the
/// first language module loaded, the primary tool's language, a shell
/// shebang (`bash`).
fn language(batch: &str, tool_language: Option<String>) -> Option<String> {
    let interp = batch.lines().next().and_then(lang::shebang);
    if let Some(l) = interp.and_then(lang::by_interpreter) {
        return Some(l.name.into());
    }
    let lines: Vec<Vec<&str>> = code_lines(batch)
        .map(|l| words(l).into_iter().map(|(_, w)| w).collect())
        .collect();
    let calls = lines
        .iter()
        .filter(|ws| lang::modules_loaded(ws).is_empty());
    let first = |by: fn(&str) -> Option<&'static lang::Lang>| {
        calls.clone().flat_map(|ws| ws.iter()).find_map(|w| by(w))
    };
    if let Some(l) = first(lang::by_interpreter).or_else(|| first(lang::by_extension)) {
        return Some(l.name.into());
    }
    let module = lines
        .iter()
        .flat_map(|ws| lang::modules_loaded(ws))
        .find_map(|m| lang::by_module(&m));
    if let Some(l) = module {
        return Some(l.name.into());
    }
    tool_language.or_else(|| interp.filter(|i| lang::is_shell(i)).map(|_| "bash".into()))
}

/// The names of calls that write (`saveRDS(`, `write.csv(`,
/// `adata.write_h5ad(`, `df.to_csv(`): a file named inside one is an output.
/// A part of a dotted name (`write` of `write.csv`) that starts with one of
/// these makes the call a writing one.
const WRITE_CALLS: &[&str] = &["save", "write", "to_", "export"];

/// True when the word at `at` in `line` is written to: after `>`, after an
/// `-o`/`--out...` option, or inside a call whose name starts with one of
/// [`WRITE_CALLS`].
fn is_output(line: &str, at: usize, previous: Option<&str>) -> bool {
    if line[..at].trim_end().ends_with('>') {
        return true;
    }
    if previous.is_some_and(|p| p == "-o" || p.starts_with("--out")) {
        return true;
    }
    let mut depth = 0usize;
    for (i, c) in line[..at].char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' if depth > 0 => depth -= 1,
            '(' => {
                let head = &line[..i];
                let name_start = head
                    .rfind(|c: char| !(c.is_alphanumeric() || "_.:".contains(c)))
                    .map_or(0, |j| j + 1);
                let name = head[name_start..].to_lowercase();
                let writes = name
                    .split(['.', ':'])
                    .any(|part| WRITE_CALLS.iter().any(|w| part.starts_with(w)));
                if writes {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// The input files named in the sources: words with a known file type that
/// are not written to, each sized by `stat`.
fn inputs_found(sources: &[&Source], table: &ToolTable) -> Vec<InputFile> {
    let mut out: Vec<InputFile> = Vec::new();
    for src in sources {
        for line in code_lines(&src.text) {
            let ws = words(line);
            for (k, &(at, w)) in ws.iter().enumerate() {
                let Some(ty) = table.file_type(w) else {
                    continue;
                };
                let named = ty
                    .extensions
                    .iter()
                    .any(|e| w.len() > e.len() && !w[..w.len() - e.len()].ends_with('/'));
                let previous = k.checked_sub(1).map(|j| ws[j].1);
                let is_call = line[at + w.len()..].starts_with('(');
                if !named
                    || is_call
                    || w.contains("://")
                    || is_output(line, at, previous)
                    || out.iter().any(|i| i.path == w)
                {
                    continue;
                }
                out.push(InputFile {
                    path: w.to_string(),
                    size_mb: resolve(w, &src.dir).and_then(|p| size_mb(&p)),
                    file_type: ty.name.clone(),
                    mem_factor: ty.mem_factor,
                });
            }
        }
    }
    out
}

/// The size of a regular file, MiB, from `stat` (the file is not opened).
fn size_mb(path: &Path) -> Option<f64> {
    let m = fs::metadata(path).ok()?;
    m.is_file()
        .then(|| hpc_core::num::round6(m.len() as f64 / (1024.0 * 1024.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_paths_whole() {
        let w: Vec<&str> = words(r#"x <- readRDS("data/a b.rds"); f(in=~/x.h5ad)"#)
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            w,
            ["x", "-", "readRDS", "data/a", "b.rds", "f", "in", "~/x.h5ad"]
        );
    }

    #[test]
    fn outputs_are_told_from_inputs() {
        let out = |line: &str, word: &str, prev: Option<&str>| {
            is_output(line, line.find(word).unwrap(), prev)
        };
        assert!(out(r#"saveRDS(obj, "o.rds")"#, "o.rds", None));
        assert!(out(r#"saveRDS(obj, file.path(d, "o.rds"))"#, "o.rds", None));
        assert!(out(r#"adata.write_h5ad("o.h5ad")"#, "o.h5ad", None));
        assert!(out(r#"write.csv(m, "o.csv")"#, "o.csv", None));
        assert!(!out(r#"sc.read_h5ad("i.h5ad")"#, "i.h5ad", None));
        assert!(out("samtools view in.bam > o.sam", "o.sam", None));
        assert!(out("samtools sort -o o.bam in.bam", "o.bam", Some("-o")));
        assert!(!out(
            "samtools sort -o o.bam in.bam",
            "in.bam",
            Some("o.bam")
        ));
        assert!(!out(
            r#"x <- readRDS("in.rds"); saveRDS(x, "o.rds")"#,
            "in.rds",
            None
        ));
    }

    #[test]
    fn sha256_of_a_known_text() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
