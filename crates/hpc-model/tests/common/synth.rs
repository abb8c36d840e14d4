//! Synthetic job traces with known per-group distributions, for the
//! calibration tests and `bench/model.sh` (through the `gen_trace`
//! example): tight groups (log-sd 0.1), loose groups (0.7), groups whose
//! memory grows with their input size, and groups that drift upwards (e^1
//! over the trace). Runtimes are log-normal per group; users ask for 3x
//! their group's typical memory and time. [`shaped`] draws traces of one
//! kind of group only, and adds the ceiling: memory that grows with the
//! input up to a cap (an aligner's buffer, a JVM's -Xmx), where the longest
//! jobs, the costliest, sit.

/// The CSV header the trace has.
pub const HEADER: &str = "id,group,used_mb,request_mb,runtime_s,limit_s,input_mb";

use hpc_testkit::rng::Lcg;

/// What kind of group.
#[derive(Clone, Copy)]
enum Kind {
    Tight,
    Loose,
    Input,
    Drift,
    Ceiling,
}

/// `jobs` rows of a trace drawn with `seed`, in id order.
pub fn trace(seed: u64, jobs: usize) -> String {
    draw(
        seed,
        jobs,
        &[Kind::Tight, Kind::Loose, Kind::Input, Kind::Drift],
        16,
    )
}

/// `jobs` rows of a trace of one `shape`: `ceiling` (8 groups whose memory
/// grows with input up to a cap, 1.5x the group's typical value, and whose
/// runtime grows with input, so the costliest jobs sit at the cap),
/// `tight` (8 groups, log-sd 0.1), `drift` (8 drifting groups) or
/// `single` (one loose group).
pub fn shaped(seed: u64, jobs: usize, shape: &str) -> String {
    match shape {
        "ceiling" => draw(seed, jobs, &[Kind::Ceiling], 8),
        "tight" => draw(seed, jobs, &[Kind::Tight], 8),
        "drift" => draw(seed, jobs, &[Kind::Drift], 8),
        "single" => draw(seed, jobs, &[Kind::Loose], 1),
        other => panic!("no shape {other}"),
    }
}

/// The shapes [`shaped`] draws.
pub const SHAPES: [&str; 4] = ["ceiling", "tight", "drift", "single"];

fn draw(seed: u64, jobs: usize, kinds: &[Kind], n: usize) -> String {
    let mut rng = Lcg::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // n groups: a memory level, a runtime level and a popularity each.
    let groups: Vec<(Kind, f64, f64, f64)> = (0..n)
        .map(|i| {
            let mem = (5.0 + 5.0 * rng.uniform()).exp(); // 150 MiB .. 22 GiB
            let run = (4.0 + 5.0 * rng.uniform()).exp(); // 1 min .. 2 h
            let weight = 0.2 + rng.uniform();
            (kinds[i % kinds.len()], mem, run, weight)
        })
        .collect();
    let total: f64 = groups.iter().map(|g| g.3).sum();
    let mut out = String::from(HEADER);
    out.push('\n');
    for id in 0..jobs {
        let mut pick = rng.uniform() * total;
        let gi = groups
            .iter()
            .position(|g| {
                pick -= g.3;
                pick <= 0.0
            })
            .unwrap_or(groups.len() - 1);
        let (kind, mem, run, _) = groups[gi];
        let t = id as f64 / jobs as f64;
        let input = (7.0 + rng.normal()).exp();
        let used = match kind {
            Kind::Tight => mem * (0.1 * rng.normal()).exp(),
            Kind::Loose => mem * (0.7 * rng.normal()).exp(),
            Kind::Input => mem * (input / 1100.0).powf(0.8) * (0.1 * rng.normal()).exp(),
            Kind::Drift => mem * (t + 0.25 * rng.normal()).exp(),
            Kind::Ceiling => (mem * (input / 1100.0).powf(0.8) * (0.3 * rng.normal()).exp())
                .min(mem * 1.5 * (0.005 * rng.normal()).exp()),
        };
        let runtime = match kind {
            Kind::Ceiling => run * (input / 1100.0) * (0.3 * rng.normal()).exp(),
            _ => run * (0.3 * rng.normal()).exp(),
        };
        out.push_str(&format!(
            "{id},g{gi},{used:.1},{:.0},{runtime:.0},{:.0},{input:.1}\n",
            3.0 * mem,
            3.0 * run,
        ));
    }
    out
}

/// A size as Nextflow writes it (`512 MB`, `1.5 GB`).
fn nf_size(mb: f64) -> String {
    if mb >= 1024.0 {
        format!("{:.1} GB", mb / 1024.0)
    } else {
        format!("{mb:.0} MB")
    }
}

/// A duration as Nextflow writes it (`1h 2m 3s`, `45s`).
fn nf_duration(s: f64) -> String {
    let s = s.round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m {s}s"),
    }
}

/// The same jobs as [`trace`], written as a Nextflow `-with-trace` file:
/// the group is the process (`PROC_gN (sample)`), every 50th task failed
/// once for memory and was retried (attempt 2), every 97th has `-` for its
/// peak (not usable, counted).
pub fn nextflow(seed: u64, jobs: usize) -> String {
    let mut out = String::from(
        "task_id\thash\tnative_id\tname\tstatus\texit\tsubmit\tduration\trealtime\t%cpu\tpeak_rss\tpeak_vmem\trchar\twchar\tmemory\ttime\tattempt\n",
    );
    let csv = trace(seed, jobs);
    let mut task = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (id, group) = (f[0].parse::<u64>().unwrap(), f[1]);
        let num = |i: usize| f[i].parse::<f64>().unwrap();
        let (used, req, run, limit, input) = (num(2), num(3), num(4), num(5), num(6));
        let submit = format!(
            "2023-04-{:02} {:02}:{:02}:{:02}.{:03}",
            1 + id / 86400,
            id / 3600 % 24,
            id / 60 % 60,
            id % 60,
            id % 1000
        );
        let name = format!("PROC_{group} (s{id})");
        let peak = if id % 97 == 0 {
            "-".to_string()
        } else {
            nf_size(used)
        };
        let mut row = |status: &str, attempt: u32, peak: &str, mem: f64| {
            task += 1;
            out.push_str(&format!(
                "{task}\tab/{task:06x}\t{task}\t{name}\t{status}\t0\t{submit}\t{d}\t{d}\t95.3%\t{peak}\t{peak}\t{}\t1 MB\t{}\t{}\t{attempt}\n",
                nf_size(input),
                nf_size(mem),
                nf_duration(limit),
                d = nf_duration(run),
            ));
        };
        if id % 50 == 1 {
            row("FAILED", 1, &nf_size(req.min(used)), req);
            row("COMPLETED", 2, &peak, 2.0 * req);
        } else {
            row("COMPLETED", 1, &peak, req);
        }
    }
    out
}
