//! What `hpc-model pool` reads from SLURM: the associations, the QOS, the
//! partitions and the jobs in the queue, each from the text of one command
//! (run here, or recorded in a file). Every parser reports the line and the
//! reason of what it cannot read.

use std::process::Command;

use hpc_core::slurm::parse_tres;
use hpc_core::{Error, Result};
use serde::Serialize;

/// The associations: the user's rows (which accounts, partitions and QOS
/// they may use) and the account rows (the tree, with its limits).
pub const ASSOC_CMD: &[&str] = &[
    "sacctmgr",
    "show",
    "associations",
    "format=account,user,partition,qos,defaultqos,parentname,grptres",
    "-n",
    "-P",
];
/// The QOS with their group and per-user limits.
pub const QOS_CMD: &[&str] = &[
    "sacctmgr",
    "show",
    "qos",
    "format=name,grptres,maxtrespu",
    "-n",
    "-P",
];
/// The partitions: which is the default, and their QOS.
pub const PARTITIONS_CMD: &[&str] = &["scontrol", "show", "partition", "-o"];
/// Everyone's running and pending jobs with the TRES they hold or ask for,
/// one line a job: `-r` lists each task of a pending array on its own line
/// (without it squeue folds them into one, and 100 pending tasks counted as
/// one job).
pub const USAGE_CMD: &[&str] = &[
    "squeue",
    "-h",
    "-a",
    "-r",
    "-t",
    "RUNNING,PENDING",
    "-O",
    "Account:|,UserName:|,Partition:|,QOS:|,StateCompact:|,tres-alloc:",
];

/// The resources a limit bounds (or a job uses): CPUs, memory in MiB, GPUs.
/// Absent means no limit (or none used).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Amounts {
    /// CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    /// Memory, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<f64>,
    /// GPUs (`gres/gpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
}

/// The three TRES a pool is sized by, in the order ties are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Res {
    /// `cpu`
    Cpu,
    /// `mem`
    Mem,
    /// `gres/gpu`
    Gpu,
}

impl Res {
    /// All three, in order.
    pub const ALL: [Res; 3] = [Res::Cpu, Res::Mem, Res::Gpu];

    /// Its field in [`Amounts`] as written in records.
    pub fn field(self) -> &'static str {
        match self {
            Res::Cpu => "cpu",
            Res::Mem => "mem_mb",
            Res::Gpu => "gpus",
        }
    }

    /// Its short name (`cpu`, `mem`, `gpu`), as the binding limit is named.
    pub fn name(self) -> &'static str {
        match self {
            Res::Cpu => "cpu",
            Res::Mem => "mem",
            Res::Gpu => "gpu",
        }
    }
}

impl Amounts {
    /// The amount of one TRES.
    pub fn get(&self, r: Res) -> Option<f64> {
        match r {
            Res::Cpu => self.cpu,
            Res::Mem => self.mem_mb,
            Res::Gpu => self.gpus,
        }
    }

    /// Sets the amount of one TRES.
    pub fn set(&mut self, r: Res, v: Option<f64>) {
        match r {
            Res::Cpu => self.cpu = v,
            Res::Mem => self.mem_mb = v,
            Res::Gpu => self.gpus = v,
        }
    }

    /// Adds another amount, TRES by TRES (absent plus absent stays absent).
    pub fn add(&mut self, o: &Amounts) {
        for r in Res::ALL {
            if let Some(v) = o.get(r) {
                self.set(r, Some(self.get(r).unwrap_or(0.0) + v));
            }
        }
    }
}

/// Parses a TRES list (`cpu=104,mem=812G,gres/gpu=3`).
pub fn parse_amounts(s: &str) -> std::result::Result<Amounts, String> {
    let t = parse_tres(s)?;
    Ok(Amounts {
        cpu: t.cpu.map(|v| v as f64),
        mem_mb: t.mem_mb,
        gpus: t.gpus.map(|v| v as f64),
    })
}

/// One association row.
#[derive(Debug, Clone, PartialEq)]
pub struct Assoc {
    /// The account.
    pub account: String,
    /// The user; empty on an account's own row.
    pub user: String,
    /// The partition the association is for; absent when for all.
    pub partition: Option<String>,
    /// The QOS the association may use.
    pub qos: Vec<String>,
    /// Its default QOS.
    pub default_qos: Option<String>,
    /// On an account row, the parent account.
    pub parent: Option<String>,
    /// Its GrpTRES.
    pub grp: Amounts,
}

/// One QOS row.
#[derive(Debug, Clone, PartialEq)]
pub struct Qos {
    /// The name.
    pub name: String,
    /// GrpTRES: everyone's jobs in the QOS together.
    pub grp: Amounts,
    /// MaxTRESPerUser: one user's jobs in the QOS together.
    pub per_user: Amounts,
}

/// One partition.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// The name.
    pub name: String,
    /// Whether jobs that name none go here.
    pub default: bool,
    /// The partition QOS, when one is set.
    pub qos: Option<String>,
}

/// One running or pending job of anyone.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedJob {
    /// Its account.
    pub account: String,
    /// Its user.
    pub user: String,
    /// Its partition (a pending job may list several, comma-separated).
    pub partition: String,
    /// Its QOS.
    pub qos: String,
    /// The TRES it holds (running) or asks for (pending).
    pub tres: Amounts,
}

/// A line error: `source: line N: reason`.
fn line_error(source: &str, n: usize, reason: impl std::fmt::Display) -> Error {
    Error::Other(format!("{source}: line {n}: {reason}"))
}

/// The non-empty lines of a command's output with their numbers, each
/// split at `|` into exactly `want` fields.
fn rows<'a>(
    text: &'a str,
    source: &'a str,
    want: usize,
) -> impl Iterator<Item = Result<(usize, Vec<&'a str>)>> + 'a {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .map(move |(n, l)| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            if f.len() == want {
                Ok((n, f))
            } else {
                Err(line_error(
                    source,
                    n,
                    format!("{} fields, expected {want}", f.len()),
                ))
            }
        })
}

fn amounts_at(source: &str, n: usize, what: &str, s: &str) -> Result<Amounts> {
    parse_amounts(s).map_err(|e| line_error(source, n, format!("{what}: {e}")))
}

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Parses the output of [`ASSOC_CMD`].
pub fn parse_assoc(text: &str, source: &str) -> Result<Vec<Assoc>> {
    rows(text, source, 7)
        .map(|row| {
            let (n, f) = row?;
            if f[0].is_empty() {
                return Err(line_error(source, n, "no account"));
            }
            Ok(Assoc {
                account: f[0].to_string(),
                user: f[1].to_string(),
                partition: some(f[2]),
                qos: f[3]
                    .split(',')
                    .filter(|q| !q.is_empty())
                    .map(str::to_string)
                    .collect(),
                default_qos: some(f[4]),
                parent: some(f[5]),
                grp: amounts_at(source, n, "GrpTRES", f[6])?,
            })
        })
        .collect()
}

/// Parses the output of [`QOS_CMD`].
pub fn parse_qos(text: &str, source: &str) -> Result<Vec<Qos>> {
    rows(text, source, 3)
        .map(|row| {
            let (n, f) = row?;
            Ok(Qos {
                name: f[0].to_string(),
                grp: amounts_at(source, n, "GrpTRES", f[1])?,
                per_user: amounts_at(source, n, "MaxTRESPU", f[2])?,
            })
        })
        .collect()
}

/// Parses the output of [`PARTITIONS_CMD`] (one partition a line,
/// `Key=Value` words).
pub fn parse_partitions(text: &str, source: &str) -> Result<Vec<Partition>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        };
        let name =
            value("PartitionName").ok_or_else(|| line_error(source, i + 1, "no PartitionName="))?;
        out.push(Partition {
            name: name.to_string(),
            default: value("Default") == Some("YES"),
            qos: value("QoS").filter(|q| *q != "N/A").map(str::to_string),
        });
    }
    Ok(out)
}

/// Parses the output of [`USAGE_CMD`].
pub fn parse_usage(text: &str, source: &str) -> Result<Vec<QueuedJob>> {
    rows(text, source, 6)
        .map(|row| {
            let (n, f) = row?;
            Ok(QueuedJob {
                account: f[0].to_string(),
                user: f[1].to_string(),
                partition: f[2].to_string(),
                qos: f[3].to_string(),
                tres: amounts_at(source, n, "TRES", f[5])?,
            })
        })
        .collect()
}

/// Runs a command and returns its standard output. A missing program, a
/// non-zero exit or output that is not UTF-8 is an error that names the
/// command (and carries the first line of its stderr).
pub fn run_command(argv: &[&str]) -> Result<String> {
    let shown = argv.join(" ");
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| Error::Other(format!("cannot run `{shown}`: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(Error::Other(format!(
            "`{shown}` failed ({}){}{}",
            out.status,
            if first.is_empty() { "" } else { ": " },
            first.trim()
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Error::Other(format!("`{shown}`: output is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn association_rows_keep_partition_qos_and_limits() {
        let text = "root||||||\r\nlab||||||cpu=100\nlab|ana|gpu|lab-q,normal|lab-q||mem=1G\n\n";
        let a = parse_assoc(text, "assoc").unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[1].grp.cpu, Some(100.0));
        assert_eq!(a[2].partition.as_deref(), Some("gpu"));
        assert_eq!(a[2].qos, vec!["lab-q", "normal"]);
        assert_eq!(a[2].default_qos.as_deref(), Some("lab-q"));
        assert_eq!(a[2].grp.mem_mb, Some(1024.0));
        assert_eq!(a[0].parent, None);
    }

    #[test]
    fn a_bad_line_is_named_with_its_reason() {
        let e = parse_assoc("lab||||||\nlab|ana\n", "f.txt").unwrap_err();
        assert_eq!(e.to_string(), "f.txt: line 2: 2 fields, expected 7");
        let e = parse_qos("q|cpu=x|\n", "qos").unwrap_err();
        assert!(e.to_string().starts_with("qos: line 1: GrpTRES:"), "{e}");
        let e = parse_partitions("Nodes=a\n", "p").unwrap_err();
        assert_eq!(e.to_string(), "p: line 1: no PartitionName=");
    }

    #[test]
    fn qos_rows_give_group_and_per_user_limits() {
        let q = parse_qos("normal||\nlab-q|cpu=104,mem=812G,gres/gpu=3|cpu=52\n", "q").unwrap();
        assert_eq!(q[0].grp, Amounts::default());
        assert_eq!(q[1].grp.gpus, Some(3.0));
        assert_eq!(q[1].grp.mem_mb, Some(812.0 * 1024.0));
        assert_eq!(q[1].per_user.cpu, Some(52.0));
    }

    #[test]
    fn partitions_give_the_default_and_their_qos() {
        let text = "PartitionName=debug AllowGroups=ALL Default=YES QoS=N/A State=UP\n\
                    PartitionName=gpu Default=NO QoS=gpu-part State=UP\n";
        let p = parse_partitions(text, "p").unwrap();
        assert!(p[0].default && p[0].qos.is_none());
        assert!(!p[1].default);
        assert_eq!(p[1].qos.as_deref(), Some("gpu-part"));
    }

    #[test]
    fn queued_jobs_carry_their_tres() {
        let text = "lab|ana|debug|lab-q|R|cpu=8,mem=180G,node=1,billing=8,gres/gpu=1\n\
                    lab|bo|debug|lab-q|PD|cpu=8,mem=48G,node=1\n";
        let j = parse_usage(text, "u").unwrap();
        assert_eq!(j[0].tres.gpus, Some(1.0));
        assert_eq!(j[1].user, "bo");
        assert_eq!(j[1].tres.gpus, None);
    }

    #[test]
    fn a_missing_program_and_a_failing_one_are_errors() {
        let e = run_command(&["hpc-model-no-such-program", "x"]).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("cannot run `hpc-model-no-such-program x`"));
        let e = run_command(&["sh", "-c", "echo boom >&2; exit 3"]).unwrap_err();
        assert!(e.to_string().contains("failed"), "{e}");
        assert!(e.to_string().ends_with(": boom"), "{e}");
        assert_eq!(run_command(&["sh", "-c", "echo a"]).unwrap(), "a\n");
    }
}
