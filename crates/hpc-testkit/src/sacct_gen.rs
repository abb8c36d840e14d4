//! A generator of realistic sacct `--parsable2` text for benchmarks and
//! reliability tests: job lines with `.batch`, `.extern` and numbered steps,
//! array tasks, every common state, old and new memory forms. hpc-ingest's
//! tests, its `gen_sacct` example and the benchmarks (bench/ingest-bench.sh,
//! bench/report-bench.sh) use it; it is no part of any tool.

use std::io::Write;

/// The columns written, in order: hpc-ingest's.
pub use hpc_core::slurm::SACCT_FIELDS;

/// A small deterministic pseudo-random generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator (0 is replaced by a fixed constant).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Whole seconds as sacct prints a duration.
fn hms(s: u64) -> String {
    hpc_core::slurm::format_duration(s as f64)
}

fn cpu_text(ms: u64) -> String {
    // sacct prints MM:SS.mmm under an hour and [D-]HH:MM:SS above.
    if ms < 3_600_000 {
        format!(
            "{:02}:{:02}.{:03}",
            ms / 60_000,
            (ms / 1000) % 60,
            ms % 1000
        )
    } else {
        hms(ms / 1000)
    }
}

fn stamp(epoch: u64) -> String {
    let (y, mo, d, h, mi, s) = hpc_core::slurm::civil_from_epoch(epoch as i64);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
}

/// Writes a header and `jobs` jobs (about 4.7 lines per job) with ids from
/// `first_id`. Returns the number of lines written.
pub fn write_sacct(
    out: &mut dyn Write,
    jobs: u64,
    first_id: u64,
    seed: u64,
) -> std::io::Result<u64> {
    let mut r = Rng::new(seed);
    writeln!(out, "{}", SACCT_FIELDS.join("|"))?;
    let mut lines = 1;
    let users = [
        "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    ];
    let parts = ["cpu", "gpu", "bigmem", "short"];
    let states = [
        "COMPLETED",
        "COMPLETED",
        "COMPLETED",
        "COMPLETED",
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "CANCELLED by 1001",
        "RUNNING",
        "PENDING",
        "NODE_FAIL",
    ];
    let mut t0 = 1_767_225_600u64; // 2026-01-01
    let mut id = first_id;
    for n in 0..jobs {
        id += 1;
        t0 += r.below(30);
        let user = users[r.below(users.len() as u64) as usize];
        let part = parts[r.below(parts.len() as u64) as usize];
        let state = states[r.below(states.len() as u64) as usize];
        let nodes = if r.below(10) == 0 { 1 + r.below(8) } else { 1 };
        let cpus = nodes * [1, 2, 4, 8, 16, 32][r.below(6) as usize];
        let gpus = if part == "gpu" { 1 + r.below(4) } else { 0 };
        let reqmem = match r.below(5) {
            0 => format!("{}Mc", 1000 * (1 + r.below(8))),
            1 => format!("{}Gn", 1 << r.below(8)),
            2 => format!("{}.50G", 1 + r.below(500)),
            _ => format!("{}G", 1 << r.below(9)),
        };
        let (job_id, raw) = if n % 10 == 3 {
            (format!("{}_{}", id - 1, r.below(1000)), id.to_string())
        } else {
            (id.to_string(), id.to_string())
        };
        let limit = 60 * (10 + r.below(2880));
        let elapsed = match state {
            "PENDING" => 0,
            "TIMEOUT" => limit,
            _ => r.below(limit),
        };
        let submit = t0;
        let (start, end) = match state {
            "PENDING" => ("Unknown".to_string(), "Unknown".to_string()),
            "RUNNING" => (stamp(submit + 60), "Unknown".to_string()),
            _ => (stamp(submit + 60), stamp(submit + 60 + elapsed)),
        };
        let cpu_ms = elapsed * 1000 * cpus * (5 + r.below(95)) / 100;
        let tres = if gpus > 0 {
            format!("billing={cpus},cpu={cpus},gres/gpu={gpus},gres/gpu:a100={gpus},mem=64G,node={nodes}")
        } else {
            format!("billing={cpus},cpu={cpus},mem=64G,node={nodes}")
        };
        let nodelist = if state == "PENDING" {
            "None assigned".to_string()
        } else if nodes > 1 {
            format!("n[{:03}-{:03}]", id % 500, id % 500 + nodes - 1)
        } else {
            format!("n{:03}", id % 500)
        };
        let exit = if state == "FAILED" { "1:0" } else { "0:0" };
        let ntasks = if nodes > 1 {
            nodes.to_string()
        } else {
            String::new()
        };
        writeln!(
            out,
            "cluster1|{job_id}|{raw}|{user}|{user}grp|acct{}|{part}|job{}|{state}|{exit}|{}|{start}|{end}|{}|{elapsed}|{}|{cpus}|{tres}|{nodes}|{ntasks}|{nodelist}|{reqmem}||{}||",
            r.below(20),
            r.below(100_000),
            stamp(submit),
            hms(elapsed),
            hms(limit),
            if state == "RUNNING" { "00:00:00".to_string() } else { cpu_text(cpu_ms) },
        )?;
        lines += 1;
        if state == "PENDING" {
            continue;
        }
        let nsteps = match r.below(3) {
            0 => 0,
            1 => 1 + r.below(2),
            _ => 2 + r.below(3),
        };
        let step_names = ["batch", "extern"];
        for s in 0..(2 + nsteps) {
            let name = if s < 2 {
                step_names[s as usize].to_string()
            } else {
                (s - 2).to_string()
            };
            let rss = if state == "RUNNING" {
                String::new()
            } else {
                format!("{}K", 1000 + r.below(64_000_000))
            };
            let share = if s == 1 { 0 } else { cpu_ms / (1 + nsteps) };
            let step_state = if state.starts_with("CANCELLED") {
                "CANCELLED"
            } else {
                state
            };
            writeln!(
                out,
                "cluster1|{job_id}.{name}|{raw}.{name}||||||{step_state}|{exit}|{}|{start}|{end}|{}|{elapsed}||{cpus}|cpu={cpus},mem=64G,node={nodes}|{nodes}|1|{nodelist}||{rss}|{}||",
                stamp(submit + 60),
                hms(elapsed),
                cpu_text(share),
            )?;
            lines += 1;
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_text_has_the_expected_shape() {
        let mut out = Vec::new();
        let lines = write_sacct(&mut out, 2000, 1000, 7).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count() as u64, lines);
        let per_job = (lines - 1) as f64 / 2000.0;
        assert!((3.8..5.5).contains(&per_job), "{per_job} lines per job");
        assert!(text.contains("Mc|") && text.contains("Gn|") && text.contains("CANCELLED by"));
    }
}
