//! The cost of the GPU reads per sample: the sampler on a shell with 16
//! sleeping children, without GPUs and with 1, 4 and 8 GPUs read through
//! the fixture source (recorded NVML readings replayed from memory, so the
//! figure is the probe's own bookkeeping and output, not the driver's
//! calls, which only a machine with an NVIDIA GPU can time).
//!
//! For each case it prints the CPU time (getrusage) per sample, with the
//! sample and its `gpu` records written to memory as NDJSON, the median
//! of 7 runs of ROUNDS samples. Run it with
//! `cargo bench -p hpc-probe --bench gpu [-- ROUNDS]`.

mod common;

use common::{cpu_self, median, start_sleepers, stop_sleepers};
use hpc_probe::gpu::{FixtureSource, Gpus, Wanted};
use hpc_probe::node::NodeSources;
use hpc_probe::sampler::{Config, Sampler, Watch};

const RUNS: usize = 7;
const SLEEPERS: usize = 16;

/// `n` GPUs' readings as NVML gives them: an A100 each, in use, one line
/// per GPU (the source repeats the last reading).
fn fixture(n: u32) -> FixtureSource {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "{{\"index\":{i},\"minor_number\":{i},\"uuid\":\"GPU-{i:08x}-0000-0000-0000-000000000000\",\"name\":\"NVIDIA A100-SXM4-80GB\",\"memory_info\":{{\"total\":85899345920,\"free\":80000000000,\"used\":5899345920}},\"utilization_rates\":{{\"gpu\":87,\"memory\":40}},\"power_usage\":251000,\"running_compute_processes\":[{{\"pid\":1,\"used_gpu_memory\":5899345920}}]}}\n"
            )
        })
        .collect();
    FixtureSource::parse(&text).expect("fixture")
}

fn sampler(root: u32, gpus: u32) -> Sampler {
    let proc_root = std::path::PathBuf::from("/proc");
    let node = NodeSources::discover(&proc_root, std::path::Path::new("/sys"));
    let cfg = Config {
        proc_root,
        watch: Watch::Pid(root),
        pss: false,
        perf: false,
        cpus: Some(4),
        clk_tck: 100.0,
        page_size: 4096,
        self_pid: std::process::id(),
        host: Some("bench".into()),
        job_id: Some("1".into()),
        detail_every: 1,
    };
    let mut s = Sampler::new(cfg, node);
    if gpus > 0 {
        let g = Gpus::new(Box::new(fixture(gpus)), &Wanted::All).expect("gpus");
        s.set_gpus(Some(g));
    }
    s
}

/// CPU microseconds for the GPU part alone: reading `n` GPUs into a sample
/// and writing their `gpu` records, over `rounds` rounds.
fn gpu_part(n: u32, rounds: usize, out: &mut Vec<u8>) -> f64 {
    let mut g = Gpus::new(Box::new(fixture(n)), &Wanted::All).expect("gpus");
    let job: std::collections::HashSet<u32> = [1, 2, 3].into_iter().collect();
    let mut rec = hpc_core::record::Sample {
        host: Some("bench".into()),
        job_id: Some("1".into()),
        ..Default::default()
    };
    let t0 = cpu_self();
    for i in 0..rounds {
        out.clear();
        rec.t = i as f64;
        g.read_into(&mut rec, &job);
        for r in g.records() {
            hpc_core::record::write_tagged(out, "gpu", r).expect("write");
        }
    }
    (cpu_self() - t0) * 1e6 / rounds as f64
}

/// CPU microseconds per sample (and its output) over `rounds` samples.
fn per_sample(s: &mut Sampler, rounds: usize, out: &mut Vec<u8>) -> f64 {
    let t0 = cpu_self();
    for i in 0..rounds {
        out.clear();
        let rec = s.sample(i as f64, i as f64 * 0.01, None);
        hpc_core::record::write_tagged(out, "sample", &rec).expect("write");
        for g in s.gpu_records() {
            hpc_core::record::write_tagged(out, "gpu", g).expect("write");
        }
    }
    (cpu_self() - t0) * 1e6 / rounds as f64
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let sh = start_sleepers(SLEEPERS);
    let cases = [0u32, 1, 4, 8];
    let mut samplers: Vec<Sampler> = cases.iter().map(|&g| sampler(sh.id(), g)).collect();
    let mut out = Vec::with_capacity(8192);
    let mut t: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..RUNS {
        for (k, s) in samplers.iter_mut().enumerate() {
            t[k].push(per_sample(s, rounds, &mut out));
        }
    }
    println!(
        "hpc-probe sample cost, CPU us per sample (median of {RUNS} runs of {rounds}), {} watched processes, GPUs from the fixture source",
        SLEEPERS + 1
    );
    let base = median(&mut t[0]);
    println!("{:<8} {:>10} {:>12}", "gpus", "us/sample", "gpu part");
    for (k, &g) in cases.iter().enumerate() {
        let m = median(&mut t[k]);
        println!("{g:<8} {m:>10.1} {:>12.1}", m - base);
    }
    println!("the GPU part alone (read into the sample, gpu records written), CPU us per sample:");
    for &g in &cases[1..] {
        let mut v: Vec<f64> = (0..RUNS)
            .map(|_| gpu_part(g, rounds * 10, &mut out))
            .collect();
        println!("{g:<8} {:>10.2}", median(&mut v));
    }
    stop_sleepers(sh);
}
