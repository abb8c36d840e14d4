//! How hpc-plot reads its records: through hpc-core's input loop (files or
//! `-`, numbered lines, rejects, a tolerated cut last record).

use hpc_core::input::{for_each_line, Inputs};
use hpc_core::ndjson::Rejects;
use hpc_core::paths::escaped;
use hpc_core::Result;

/// Reads every input (`-` or none: stdin) through hpc-core's input loop
/// and hands each line's text to `take`, which says why a record is bad.
/// Blank lines are skipped; bad lines are reported through `rejects` (a
/// cut last record only warned about). Returns the lines read.
pub fn read_records(
    inputs: &[String],
    rejects: &mut Rejects,
    mut take: impl FnMut(&str) -> std::result::Result<(), String>,
) -> Result<u64> {
    let inputs = Inputs::new(inputs.to_vec())?;
    for_each_line(
        &inputs,
        std::io::stdin().lock(),
        rejects,
        |rejects, line| match take(line.text) {
            Ok(()) => Ok(()),
            Err(why) => line.bad_record(rejects, &escaped(&why)),
        },
    )
}
