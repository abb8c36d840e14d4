//! Prints a synthetic job trace for `hpc-model backtest`:
//! `cargo run --example gen_trace -- SEED JOBS [csv|nextflow|SHAPE]`, a CSV
//! (for `--csv`, the default) or a Nextflow `-with-trace` file (for
//! `--nextflow`) of mixed groups, or a CSV of one shape of group
//! (`ceiling`, `tight`, `drift`, `single`). The groups are described in
//! `tests/common/synth.rs`.

#[path = "../tests/common/synth.rs"]
mod synth;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| {
        args.get(i).map_or(default, |a| {
            a.parse().expect("SEED and JOBS: whole numbers")
        })
    };
    let (seed, jobs) = (num(0, 1), num(1, 10_000) as usize);
    match args.get(2).map(String::as_str) {
        None | Some("csv") => print!("{}", synth::trace(seed, jobs)),
        Some("nextflow") => print!("{}", synth::nextflow(seed, jobs)),
        Some(shape) if synth::SHAPES.contains(&shape) => {
            print!("{}", synth::shaped(seed, jobs, shape))
        }
        Some(other) => {
            eprintln!("gen_trace: {other}: csv, nextflow, ceiling, tight, drift or single");
            std::process::exit(2);
        }
    }
}
