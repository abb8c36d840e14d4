//! Prints a synthetic job trace (CSV) for `hpc-model backtest --csv`:
//! `cargo run --example gen_trace -- SEED JOBS`. The groups are described in
//! `tests/common/synth.rs`.

#[path = "../tests/common/synth.rs"]
mod synth;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("SEED and JOBS: whole numbers"))
        .collect();
    let (seed, jobs) = (
        args.first().copied().unwrap_or(1),
        args.get(1).copied().unwrap_or(10_000),
    );
    print!("{}", synth::trace(seed, jobs as usize));
}
