//! Writes generated sacct text: `gen_sacct JOBS [FIRST_ID] [SEED] > file`
//! (hpc-testkit's generator; bench/ingest-bench.sh and bench/report-bench.sh
//! build it with `cargo build --release -p hpc-ingest --example gen_sacct`).

use std::io::{BufWriter, Write};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("numeric arguments"));
    let jobs = args.next().unwrap_or(1000);
    let first = args.next().unwrap_or(1_000_000);
    let seed = args.next().unwrap_or(42);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let lines = hpc_testkit::sacct_gen::write_sacct(&mut out, jobs, first, seed)?;
    out.flush()?;
    eprintln!("gen_sacct: {jobs} jobs, {lines} lines");
    Ok(())
}
