//! The input loop: files or `-`, numbered lines, rejects, a tolerated
//! truncated last line. Kept in this one module so that it can move to the
//! shared hpc-core loop when that lands.

use hpc_core::ndjson::{open_input, LineReader, Rejects};
use hpc_core::paths::escaped;
use hpc_core::Result;

/// Reads every input (`-` or none: stdin) and hands each line's text to
/// `take`, which says why a record is bad. Blank lines are skipped;
/// bad lines are reported through `rejects`. Returns the lines read.
pub fn read_records(
    inputs: &[String],
    rejects: &mut Rejects,
    mut take: impl FnMut(&str) -> std::result::Result<(), String>,
) -> Result<u64> {
    let stdin = ["-".to_string()];
    let inputs = if inputs.is_empty() {
        &stdin[..]
    } else {
        inputs
    };
    let mut total = 0;
    for input in inputs {
        let source = (input != "-").then_some(input.as_str());
        let mut reader = LineReader::new(open_input(input)?);
        while let Some(line) = reader.next_line()? {
            let line = match line {
                Ok(l) => l,
                Err((n, why)) => {
                    rejects.reject(source, n, &why)?;
                    continue;
                }
            };
            if line.text.trim().is_empty() {
                continue;
            }
            match take(line.text) {
                Ok(()) => {}
                Err(why) if line.unterminated => {
                    let why = format!("cut last line ignored ({})", escaped(&why));
                    rejects.warn(source, line.number, &why);
                }
                Err(why) => rejects.reject(source, line.number, &escaped(&why))?,
            }
        }
        total += reader.lines_read();
    }
    Ok(total)
}
