//! How many jobs of a shape fit in a limit: the slot arithmetic.
//!
//! Both rules take a capacity per TRES (the limit, its CPUs times the
//! headroom; for the free slots, less what is in use) and give GPU slots
//! and CPU slots:
//!
//! * `bounded`: GPU slots = the fewest GPU jobs any TRES allows
//!   (floor(capacity / per job) over GPUs, CPUs and memory); CPU slots = the
//!   fewest CPU jobs any TRES allows in what the GPU jobs leave. The TRES
//!   that gives the fewest CPU slots (GPU slots when no CPU job is sized) is
//!   the binding one.
//! * `cpu-only`: GPU slots = floor(GPU limit / GPUs per job), CPU slots =
//!   floor(headroom x CPU limit / CPUs per job), each alone, as the plain
//!   CPU-count rule does (it over-subscribes memory).
//!
//! No GPU limit means no GPU slots. A job shape that no limit bounds has
//! unbounded slots (`None`).

use std::str::FromStr;

use super::slurm_text::{Amounts, Res};

/// A job's size: CPUs, memory (MiB) and GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Shape {
    /// CPUs.
    pub cpus: f64,
    /// Memory, MiB.
    pub mem_mb: f64,
    /// GPUs.
    pub gpus: f64,
}

impl Shape {
    /// The amount of one TRES the job takes.
    pub fn get(&self, r: Res) -> f64 {
        match r {
            Res::Cpu => self.cpus,
            Res::Mem => self.mem_mb,
            Res::Gpu => self.gpus,
        }
    }
}

/// The slot rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRule {
    /// Every TRES of the limit bounds both kinds of job together.
    Bounded,
    /// The plain CPU-count rule, for comparison.
    CpuOnly,
}

impl FromStr for SlotRule {
    type Err = String;
    fn from_str(s: &str) -> Result<SlotRule, String> {
        match s {
            "bounded" => Ok(SlotRule::Bounded),
            "cpu-only" => Ok(SlotRule::CpuOnly),
            _ => Err(format!("'{s}': the rule is bounded or cpu-only")),
        }
    }
}

impl SlotRule {
    /// Its name as written on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            SlotRule::Bounded => "bounded",
            SlotRule::CpuOnly => "cpu-only",
        }
    }
}

/// The slots of one account under one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slots {
    /// GPU jobs; `None` when no limit bounds them.
    pub gpu: Option<u64>,
    /// CPU jobs; `None` when no limit bounds them.
    pub cpu: Option<u64>,
    /// The TRES that bounds the count.
    pub binding: Option<Res>,
}

/// The jobs of a shape a capacity holds, with the TRES that bounds them;
/// `(None, None)` when nothing bounds them. Capacity below zero holds none.
fn fit(cap: &Amounts, job: &Shape, only: &[Res]) -> (Option<u64>, Option<Res>) {
    let mut best: (Option<u64>, Option<Res>) = (None, None);
    for &r in only {
        let (Some(c), per) = (cap.get(r), job.get(r)) else {
            continue;
        };
        if per <= 0.0 {
            continue;
        }
        // A hair over the quotient keeps 0.85 x 80 / 8 = 8.5 from flooring
        // to 8 when the product lands on 67.99999.
        let n = (c / per + 1e-9).floor().max(0.0) as u64;
        if best.0.map_or(true, |b| n < b) {
            best = (Some(n), Some(r));
        }
    }
    best
}

/// The capacity of a limit: the limit with the CPUs times the headroom.
pub fn capacity(limits: &Amounts, headroom: f64) -> Amounts {
    Amounts {
        cpu: limits.cpu.map(|c| c * headroom),
        ..*limits
    }
}

/// The slots a capacity gives the two job shapes under a rule.
pub fn slots(
    rule: SlotRule,
    cap: &Amounts,
    gpu_job: Option<&Shape>,
    cpu_job: Option<&Shape>,
) -> Slots {
    let mut out = Slots::default();
    let mut rest = *cap;
    if let Some(g) = gpu_job.filter(|g| g.gpus > 0.0) {
        let bound: &[Res] = match rule {
            SlotRule::Bounded => &Res::ALL,
            SlotRule::CpuOnly => &[Res::Gpu],
        };
        let (n, by) = match cap.gpus {
            Some(_) => fit(cap, g, bound),
            None => (Some(0), Some(Res::Gpu)),
        };
        out.gpu = n;
        out.binding = by;
        if rule == SlotRule::Bounded {
            let taken = n.unwrap_or(0) as f64;
            for r in Res::ALL {
                rest.set(r, cap.get(r).map(|c| c - taken * g.get(r)));
            }
        }
    }
    if let Some(c) = cpu_job {
        let bound: &[Res] = match rule {
            SlotRule::Bounded => &[Res::Cpu, Res::Mem],
            SlotRule::CpuOnly => &[Res::Cpu],
        };
        let (n, by) = fit(&rest, c, bound);
        out.cpu = n;
        out.binding = by.or(out.binding);
    }
    out
}

/// What is left of a capacity once `used` is taken.
pub fn left(cap: &Amounts, used: &Amounts) -> Amounts {
    let mut out = *cap;
    for r in Res::ALL {
        out.set(r, cap.get(r).map(|c| c - used.get(r).unwrap_or(0.0)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = 1024.0;

    fn worked_example() -> [Amounts; 2] {
        [
            Amounts {
                cpu: Some(104.0),
                mem_mb: Some(812.0 * G),
                gpus: Some(3.0),
            },
            Amounts {
                cpu: Some(80.0),
                mem_mb: Some(625.0 * G),
                gpus: Some(2.0),
            },
        ]
    }

    const GPU_JOB: Shape = Shape {
        cpus: 8.0,
        mem_mb: 180.0 * G,
        gpus: 1.0,
    };
    const CPU_JOB: Shape = Shape {
        cpus: 8.0,
        mem_mb: 48.0 * G,
        gpus: 0.0,
    };

    fn per_account(rule: SlotRule) -> Vec<Slots> {
        worked_example()
            .iter()
            .map(|l| slots(rule, &capacity(l, 0.85), Some(&GPU_JOB), Some(&CPU_JOB)))
            .collect()
    }

    #[test]
    fn the_cpu_only_rule_gives_24_in_the_worked_example() {
        let s = per_account(SlotRule::CpuOnly);
        assert_eq!((s[0].gpu, s[0].cpu), (Some(3), Some(11)));
        assert_eq!((s[1].gpu, s[1].cpu), (Some(2), Some(8)));
        let total: u64 = s.iter().map(|s| s.gpu.unwrap() + s.cpu.unwrap()).sum();
        assert_eq!(total, 24);
    }

    #[test]
    fn the_bounded_rule_gives_fewer_and_names_memory() {
        let s = per_account(SlotRule::Bounded);
        // 3 GPU jobs take 540G of 812G: 272G / 48G = 5 CPU jobs, while the
        // CPUs would allow (88.4 - 24) / 8 = 8.
        assert_eq!(
            (s[0].gpu, s[0].cpu, s[0].binding),
            (Some(3), Some(5), Some(Res::Mem))
        );
        // 2 GPU jobs take 360G of 625G: 265G / 48G = 5; CPUs (68 - 16) / 8 = 6.
        assert_eq!(
            (s[1].gpu, s[1].cpu, s[1].binding),
            (Some(2), Some(5), Some(Res::Mem))
        );
        let total: u64 = s.iter().map(|s| s.gpu.unwrap() + s.cpu.unwrap()).sum();
        assert_eq!(total, 15);
    }

    #[test]
    fn no_gpu_limit_gives_only_cpu_slots() {
        let cap = capacity(
            &Amounts {
                cpu: Some(80.0),
                mem_mb: Some(625.0 * G),
                gpus: None,
            },
            0.85,
        );
        for rule in [SlotRule::Bounded, SlotRule::CpuOnly] {
            let s = slots(rule, &cap, Some(&GPU_JOB), Some(&CPU_JOB));
            assert_eq!(s.gpu, Some(0), "{rule:?}");
            assert_eq!(s.cpu, Some(8), "{rule:?}: 68 CPUs / 8");
        }
    }

    #[test]
    fn gpu_slots_are_bounded_by_cpus_and_memory_too() {
        let cap = capacity(
            &Amounts {
                cpu: Some(104.0),
                mem_mb: Some(400.0 * G),
                gpus: Some(3.0),
            },
            0.85,
        );
        let s = slots(SlotRule::Bounded, &cap, Some(&GPU_JOB), None);
        assert_eq!((s.gpu, s.binding), (Some(2), Some(Res::Mem)));
        assert_eq!(s.cpu, None);
    }

    #[test]
    fn used_capacity_leaves_fewer_and_never_below_zero() {
        let cap = capacity(&worked_example()[0], 0.85);
        let used = Amounts {
            cpu: Some(100.0),
            mem_mb: Some(10.0 * G),
            gpus: None,
        };
        let s = slots(
            SlotRule::Bounded,
            &left(&cap, &used),
            Some(&GPU_JOB),
            Some(&CPU_JOB),
        );
        assert_eq!(
            (s.gpu, s.cpu, s.binding),
            (Some(0), Some(0), Some(Res::Cpu))
        );
    }

    #[test]
    fn a_shape_no_limit_bounds_is_unbounded() {
        let s = slots(SlotRule::Bounded, &Amounts::default(), None, Some(&CPU_JOB));
        assert_eq!((s.cpu, s.binding), (None, None));
        assert_eq!("cpu-only".parse::<SlotRule>(), Ok(SlotRule::CpuOnly));
        assert!("fast".parse::<SlotRule>().is_err());
    }
}
