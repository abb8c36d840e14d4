//! The outputs of `hpc-model pool`: a table for a person, `pool` records
//! (one per association, then a `pool_total`), or the sbatch flags of the
//! `--next` job.

use std::collections::BTreeMap;
use std::io::Write;

use hpc_core::record::tag_into;
use hpc_core::slurm::{format_duration, format_mem};
use hpc_core::table::{Cell, Column, Form, Table};
use hpc_core::Result;
use serde::Serialize;

use super::slots::{SlotRule, Slots};
use super::slurm_text::{Amounts, Res};
use super::{Kind, Opts, Plan, Row};

/// One association sized: the `pool` record.
#[derive(Debug, Serialize)]
pub struct Pool<'a> {
    /// The account.
    pub account: &'a str,
    /// The partition jobs go to, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<&'a str>,
    /// The QOS a job gets.
    pub qos: &'a str,
    /// The user whose association it is.
    pub user: &'a str,
    /// The slot rule (`bounded`, `cpu-only`).
    pub rule: &'static str,
    /// The limit per TRES (`cpu`, `mem_mb`, `gpus`); absent: none.
    pub limits: Amounts,
    /// Where each limit was set (`qos gpu-a GrpTRES`).
    pub limit_from: BTreeMap<&'static str, String>,
    /// What the running and pending jobs that count against each limit take.
    pub used: Amounts,
    /// GPU jobs at once; absent when no GPU job was sized or nothing bounds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_slots: Option<u64>,
    /// CPU-only jobs at once beside them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_slots: Option<u64>,
    /// GPU slots free now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_gpu_slots: Option<u64>,
    /// CPU slots free now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_cpu_slots: Option<u64>,
    /// The TRES that bounds the slots (`cpu`, `mem`, `gpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<&'static str>,
    /// The TRES that bounds the free slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_binding: Option<&'static str>,
}

/// A skipped account.
#[derive(Debug, Serialize)]
pub struct Skipped<'a> {
    /// The account.
    pub account: &'a str,
    /// `burst` or `blocked`.
    pub why: &'static str,
}

/// The sums over the sized associations: the `pool_total` record.
#[derive(Debug, Serialize)]
pub struct Total<'a> {
    /// The slot rule.
    pub rule: &'static str,
    /// Associations sized.
    pub accounts: usize,
    /// GPU slots.
    pub gpu_slots: u64,
    /// CPU slots.
    pub cpu_slots: u64,
    /// Both.
    pub jobs: u64,
    /// GPU slots free now.
    pub free_gpu_slots: u64,
    /// CPU slots free now.
    pub free_cpu_slots: u64,
    /// Both, free now.
    pub free_jobs: u64,
    /// Jobs at once under the bounded rule (with the memory bound).
    pub bounded_jobs: u64,
    /// Jobs at once under the cpu-only rule (without it).
    pub cpu_only_jobs: u64,
    /// True when some association leaves a job shape unbounded (not counted).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unbounded: bool,
    /// The accounts skipped, with why.
    pub skipped: Vec<Skipped<'a>>,
}

/// The sum of one count over the rows, and whether some were unbounded.
fn sum(plan: &Plan, f: impl Fn(&Row) -> Slots, asked: (bool, bool)) -> (u64, u64, bool) {
    let (mut g, mut c, mut unbounded) = (0, 0, false);
    for row in &plan.rows {
        let s = f(row);
        for (n, want, acc) in [(s.gpu, asked.0, &mut g), (s.cpu, asked.1, &mut c)] {
            match n {
                Some(n) => *acc += n,
                None => unbounded |= want,
            }
        }
    }
    (g, c, unbounded)
}

/// The totals of a plan.
pub fn total<'a>(opts: &Opts, plan: &'a Plan) -> Total<'a> {
    let asked = (opts.gpu_job.is_some(), opts.cpu_job.is_some());
    let (g, c, u1) = sum(plan, |r| r.slots, asked);
    let (fg, fc, u2) = sum(plan, |r| r.free, asked);
    let (og, oc, _) = sum(plan, |r| r.other, asked);
    let (bounded, cpu_only) = match opts.rule {
        SlotRule::Bounded => (g + c, og + oc),
        SlotRule::CpuOnly => (og + oc, g + c),
    };
    Total {
        rule: opts.rule.name(),
        accounts: plan.rows.len(),
        gpu_slots: g,
        cpu_slots: c,
        jobs: g + c,
        free_gpu_slots: fg,
        free_cpu_slots: fc,
        free_jobs: fg + fc,
        bounded_jobs: bounded,
        cpu_only_jobs: cpu_only,
        unbounded: u1 || u2,
        skipped: plan
            .skipped
            .iter()
            .map(|(a, why)| Skipped { account: a, why })
            .collect(),
    }
}

/// The `pool` record of a row.
pub fn record<'a>(opts: &'a Opts, row: &'a Row) -> Pool<'a> {
    Pool {
        account: &row.pool.account,
        partition: row.pool.partition.as_deref(),
        qos: &row.pool.qos,
        user: &opts.user,
        rule: opts.rule.name(),
        limits: row.limits,
        limit_from: row
            .pool
            .limits
            .iter()
            .map(|(r, l)| (r.field(), l.scope.describe()))
            .collect(),
        used: row.used,
        gpu_slots: row.slots.gpu,
        cpu_slots: row.slots.cpu,
        free_gpu_slots: row.free.gpu,
        free_cpu_slots: row.free.cpu,
        binding: row.slots.binding.map(Res::name),
        free_binding: row.free.binding.map(Res::name),
    }
}

/// One `pool` record per association, then the `pool_total` record.
pub fn ndjson(opts: &Opts, plan: &Plan, out: &mut impl Write) -> Result<()> {
    let mut buf = Vec::with_capacity(512);
    for row in &plan.rows {
        tag_into(&mut buf, "pool", &record(opts, row))?;
    }
    tag_into(&mut buf, "pool_total", &total(opts, plan))?;
    out.write_all(&buf)?;
    Ok(())
}

/// A number as SLURM would print it (no `.0`).
fn num(v: f64) -> String {
    format!("{}", hpc_core::num::round6(v))
}

/// `cpu=104,mem=812G,gpu=3` of the TRES that are present.
fn amounts(a: &Amounts) -> String {
    let parts: Vec<String> = Res::ALL
        .iter()
        .filter_map(|&r| {
            let v = a.get(r)?;
            Some(match r {
                Res::Mem => format!("mem={}", mem_amount(v)),
                _ => format!("{}={}", r.name(), num(v)),
            })
        })
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

/// A slot count: `-` when that job was not sized, `unlimited` when nothing bounds it.
fn count(n: Option<u64>, asked: bool) -> Cell {
    match (asked, n) {
        (false, _) => Cell::Missing,
        (true, Some(n)) => n.into(),
        (true, None) => "unlimited".into(),
    }
}

/// The binding TRES with where its limit was set.
fn binding(row: &Row, s: &Slots) -> String {
    match s.binding {
        Some(r) => match row.pool.limits.get(&r) {
            Some(l) => format!("{} ({})", r.name(), l.scope.describe()),
            None => format!("{} (no limit)", r.name()),
        },
        None => hpc_core::table::MISSING.into(),
    }
}

/// The table, the totals, the skipped accounts and the `--next` choice.
pub fn text(
    opts: &Opts,
    plan: &Plan,
    chosen: Option<(Kind, Option<&Row>)>,
    out: &mut impl Write,
) -> Result<()> {
    let (g, c) = (opts.gpu_job.is_some(), opts.cpu_job.is_some());
    let text = |h: &str| Column::new(h, Form::Text);
    let int = |h: &str| Column::new(h, Form::Int);
    let mut table = Table::new(vec![
        text("ACCOUNT"),
        text("PARTITION"),
        text("QOS"),
        text("LIMITS"),
        text("USED"),
        int("GPU"),
        int("CPU"),
        int("FREE_GPU"),
        int("FREE_CPU"),
        text("BINDING"),
    ]);
    for row in &plan.rows {
        table.row(vec![
            row.pool.account.as_str().into(),
            row.pool.partition.as_deref().into(),
            row.pool.qos.as_str().into(),
            amounts(&row.limits).into(),
            amounts(&row.used).into(),
            count(row.slots.gpu, g),
            count(row.slots.cpu, c),
            count(row.free.gpu, g),
            count(row.free.cpu, c),
            binding(row, &row.slots).into(),
        ]);
    }
    table.write(out)?;
    let t = total(opts, plan);
    writeln!(
        out,
        "total ({}): {} jobs at once ({} GPU + {} CPU), {} free now ({} GPU + {} CPU){}",
        t.rule,
        t.jobs,
        t.gpu_slots,
        t.cpu_slots,
        t.free_jobs,
        t.free_gpu_slots,
        t.free_cpu_slots,
        if t.unbounded {
            "; some accounts unbounded, not counted"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "with the memory bound: {} jobs; without it (cpu-only rule): {} jobs",
        t.bounded_jobs, t.cpu_only_jobs
    )?;
    for s in &t.skipped {
        writeln!(out, "skipped: {} ({})", s.account, s.why)?;
    }
    if let Some((k, row)) = chosen {
        let kind = kind_name(k);
        match row {
            Some(row) => writeln!(
                out,
                "next {kind} job: account {}, partition {}, qos {}",
                row.pool.account,
                row.pool.partition.as_deref().unwrap_or("-"),
                row.pool.qos
            )?,
            None => writeln!(out, "next {kind} job: {}", none_free(plan, k))?,
        }
    }
    Ok(())
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Gpu => "gpu",
        Kind::Cpu => "cpu",
    }
}

/// Why no account has a free slot: each account's binding limit and use.
pub fn none_free(plan: &Plan, k: Kind) -> String {
    let why: Vec<String> = plan
        .rows
        .iter()
        .map(|row| {
            let b = row
                .free
                .binding
                .and_then(|r| Some((r, row.pool.limits.get(&r)?)));
            match b {
                Some((r, l)) => format!(
                    "{}: {} ({}: {} used of {})",
                    row.pool.account,
                    r.name(),
                    l.scope.describe(),
                    show(r, l.used),
                    show(r, l.value)
                ),
                None => format!("{}: {}", row.pool.account, binding(row, &row.free)),
            }
        })
        .collect();
    let why = if why.is_empty() {
        "no account to choose from".into()
    } else {
        why.join("; ")
    };
    format!("no account has a free {} slot now: {why}", kind_name(k))
}

fn show(r: Res, v: f64) -> String {
    match r {
        Res::Mem => mem_amount(v),
        _ => num(v),
    }
}

/// Memory in use or free, as SLURM writes sizes; none is `0`, not the
/// `1M` that `format_mem` gives a request (never `--mem=0`).
fn mem_amount(v: f64) -> String {
    if v <= 0.0 {
        "0".into()
    } else {
        format_mem(v)
    }
}

/// The sbatch flags for the next job in that row; the CPU job's time is the
/// GPU job's times the factor.
pub fn sbatch(opts: &Opts, row: &Row, k: Kind, out: &mut impl Write) -> Result<()> {
    let mut flags = vec![format!("--account={}", row.pool.account)];
    if let Some(p) = &row.pool.partition {
        flags.push(format!("--partition={p}"));
    }
    flags.push(format!("--qos={}", row.pool.qos));
    let time = match k {
        Kind::Gpu => opts.time_s,
        Kind::Cpu => opts.time_s.map(|t| t * opts.cpu_time_factor),
    };
    if let Some(t) = time {
        flags.push(format!("--time={}", format_duration(t)));
    }
    writeln!(out, "{}", flags.join(" "))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_slurm_writes_them() {
        assert_eq!(format_duration(3600.0 * 5.0), "05:00:00");
        assert_eq!(format_duration(86400.0 * 2.0 + 61.5), "2-00:01:02");
        assert_eq!(format_mem(812.0 * 1024.0), "812G");
        assert_eq!(format_mem(1000.0), "1000M");
        let a = Amounts {
            cpu: Some(88.4),
            mem_mb: None,
            gpus: Some(3.0),
        };
        assert_eq!(amounts(&a), "cpu=88.4,gpu=3");
        assert_eq!(amounts(&Amounts::default()), "none");
        // Nothing in use read "mem=1M" (an empty queue).
        let idle = Amounts {
            cpu: Some(0.0),
            mem_mb: Some(0.0),
            gpus: None,
        };
        assert_eq!(amounts(&idle), "cpu=0,mem=0");
        assert_eq!(show(Res::Mem, 0.0), "0");
    }
}
