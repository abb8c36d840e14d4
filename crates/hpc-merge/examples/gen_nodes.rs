//! Writes synthetic hpc-probe node files for the merge benchmark:
//! `gen_nodes DIR NODES SAMPLES DURATION_S` writes DIR/nodeNN.ndjson, each a
//! meta and SAMPLES samples spread evenly over DURATION_S seconds.

use std::fmt::Write as _;
use std::io::Write;

fn main() -> std::io::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!("usage: gen_nodes DIR NODES SAMPLES DURATION_S");
        std::process::exit(2);
    }
    let dir = std::path::Path::new(&a[1]);
    let nodes: usize = a[2].parse().expect("NODES");
    let samples: usize = a[3].parse().expect("SAMPLES");
    let duration: f64 = a[4].parse().expect("DURATION_S");
    std::fs::create_dir_all(dir)?;
    let dt = duration / samples as f64;
    let start = 1_700_000_000.0;
    let mut line = String::with_capacity(512);
    for n in 0..nodes {
        let host = format!("node{n:02}");
        let f = std::fs::File::create(dir.join(format!("{host}.ndjson")))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        writeln!(
            w,
            "{{\"kind\":\"meta\",\"job_id\":\"4242\",\"host\":\"{host}\",\"start\":{start},\"interval_s\":{dt},\"req_cpus\":32,\"req_mem_mb\":128000,\"nnodes\":{nodes},\"probe_version\":\"bench\"}}"
        )?;
        let (mut cpu_u, mut cpu_s, mut rd, mut wr, mut en) =
            (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ n as u64;
        for i in 0..samples {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = (x >> 11) as f64 / (1u64 << 53) as f64;
            let t = start + (i + 1) as f64 * dt;
            let cores = 24.0 + 8.0 * r;
            cpu_u += cores * 0.9 * dt;
            cpu_s += cores * 0.1 * dt;
            let (rmb, wmb) = (5.0 * r, 2.0 * r);
            rd += rmb * dt;
            wr += wmb * dt;
            let pw = 300.0 + 100.0 * r;
            en += pw * dt;
            line.clear();
            let _ = write!(
                line,
                "{{\"kind\":\"sample\",\"t\":{t:.3},\"host\":\"{host}\",\"job_id\":\"4242\",\"rss_mb\":{:.1},\"cpu_user_s\":{cpu_u:.2},\"cpu_sys_s\":{cpu_s:.2},\"cpu_cores\":{cores:.3},\"cpu_frac\":{:.4},\"read_mb\":{rd:.3},\"write_mb\":{wr:.3},\"read_mbps\":{rmb:.3},\"write_mbps\":{wmb:.3},\"lustre_read_mbps\":{:.3},\"lustre_write_mbps\":{:.3},\"lustre_meta_ops\":{:.1},\"numa_miss_rate\":{:.4},\"cpi\":{:.3},\"energy_j\":{en:.1},\"power_w\":{pw:.1}}}",
                40000.0 + 20000.0 * r,
                cores / 32.0,
                3.0 * r,
                1.0 * r,
                20.0 * r,
                0.05 * r,
                0.8 + 0.2 * r,
            );
            line.push('\n');
            w.write_all(line.as_bytes())?;
        }
        w.flush()?;
    }
    Ok(())
}
