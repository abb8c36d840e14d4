//! Which limit applies to a user's jobs in one association, and how much of
//! it is in use now.
//!
//! SLURM takes each TRES's group limit from the first level that sets it, in
//! the order: partition QOS, job QOS, the user's association, the account's
//! associations up the tree. A QOS's MaxTRESPerUser applies beside it (first
//! set in partition QOS, then job QOS). Each limit counts its own jobs: a QOS
//! group limit every job in the QOS, a per-user limit the user's jobs in the
//! QOS, the user's association the user's jobs in the account, an account's
//! association every job in that account and the accounts below it.

use std::collections::{BTreeMap, BTreeSet};

use super::slurm_text::{Amounts, Assoc, Partition, Qos, QueuedJob, Res};

/// The level a limit was set at, and so which jobs count against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// A QOS's GrpTRES: every job in the QOS.
    QosGroup(String),
    /// A QOS's MaxTRESPerUser: the user's jobs in the QOS.
    QosUser(String),
    /// The user's association: the user's jobs in the account (and partition).
    User(String, Option<String>),
    /// An account's association: every job in it and its sub-accounts.
    Account(String),
}

impl Scope {
    /// How the scope is named in the output (`qos gpu-a GrpTRES`).
    pub fn describe(&self) -> String {
        match self {
            Scope::QosGroup(q) => format!("qos {q} GrpTRES"),
            Scope::QosUser(q) => format!("qos {q} MaxTRESPerUser"),
            Scope::User(a, _) => format!("user association in {a} GrpTRES"),
            Scope::Account(a) => format!("account {a} GrpTRES"),
        }
    }
}

/// One TRES's limit: its value, where it was set, and what counts against it.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The limit (MiB for memory).
    pub value: f64,
    /// Where it was set.
    pub scope: Scope,
    /// What the queued jobs in its scope hold or ask for.
    pub used: f64,
}

/// A user's association with the limits that apply to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The account.
    pub account: String,
    /// The partition jobs go to: the association's, else the default one.
    pub partition: Option<String>,
    /// The QOS a job gets.
    pub qos: String,
    /// Per TRES, the tightest limit; absent when nothing limits it.
    pub limits: BTreeMap<Res, Limit>,
}

/// What `resolve` reads.
pub struct Sources<'a> {
    /// The user whose associations are sized.
    pub user: &'a str,
    /// Every association row.
    pub assocs: &'a [Assoc],
    /// Every QOS.
    pub qos: &'a [Qos],
    /// Every partition.
    pub partitions: &'a [Partition],
    /// Everyone's running and pending jobs.
    pub jobs: &'a [QueuedJob],
}

/// The QOS a job in this association gets when it names none: the default
/// QOS, else the only one it may use, else `normal`, as SLURM picks.
pub fn job_qos(a: &Assoc) -> String {
    if let Some(q) = &a.default_qos {
        return q.clone();
    }
    match a.qos.as_slice() {
        [only] => only.clone(),
        _ => "normal".into(),
    }
}

impl Sources<'_> {
    fn qos_named(&self, name: &str) -> Option<&Qos> {
        self.qos.iter().find(|q| q.name == name)
    }

    fn account_row(&self, account: &str) -> Option<&Assoc> {
        self.assocs
            .iter()
            .find(|a| a.user.is_empty() && a.account == account)
    }

    /// The account and its ancestors, nearest first (stops at a cycle).
    fn ancestry(&self, account: &str) -> Vec<&Assoc> {
        let mut out: Vec<&Assoc> = Vec::new();
        let mut next = self.account_row(account);
        while let Some(row) = next {
            if out.iter().any(|r| r.account == row.account) {
                break;
            }
            out.push(row);
            next = row.parent.as_deref().and_then(|p| self.account_row(p));
        }
        out
    }

    /// The account and every account below it.
    fn subtree<'s>(&'s self, account: &'s str) -> BTreeSet<&'s str> {
        let mut set = BTreeSet::from([account]);
        loop {
            let before = set.len();
            for a in self.assocs.iter().filter(|a| a.user.is_empty()) {
                if a.parent.as_deref().is_some_and(|p| set.contains(p)) {
                    set.insert(a.account.as_str());
                }
            }
            if set.len() == before {
                return set;
            }
        }
    }

    /// The sum of one TRES over the queued jobs that count against a scope.
    fn used(&self, scope: &Scope, r: Res) -> f64 {
        let tree = match scope {
            Scope::Account(a) => self.subtree(a),
            _ => BTreeSet::new(),
        };
        let counts = |j: &QueuedJob| match scope {
            Scope::QosGroup(q) => j.qos == *q,
            Scope::QosUser(q) => j.qos == *q && j.user == self.user,
            Scope::User(a, p) => {
                j.account == *a
                    && j.user == self.user
                    && p.as_ref()
                        .map_or(true, |p| j.partition.split(',').any(|x| x == p))
            }
            Scope::Account(_) => tree.contains(j.account.as_str()),
        };
        self.jobs
            .iter()
            .filter(|j| counts(j))
            .filter_map(|j| j.tres.get(r))
            .fold(0.0, |a, b| a + b)
    }

    /// The group limits in SLURM's order, then the per-user ones.
    fn candidates(
        &self,
        a: &Assoc,
        partition_qos: Option<&str>,
        qos: &str,
    ) -> Vec<(Scope, Amounts)> {
        let mut group = Vec::new();
        let mut per_user = Vec::new();
        for name in partition_qos.into_iter().chain([qos]) {
            if let Some(q) = self.qos_named(name) {
                group.push((Scope::QosGroup(q.name.clone()), q.grp));
                per_user.push((Scope::QosUser(q.name.clone()), q.per_user));
            }
        }
        group.push((Scope::User(a.account.clone(), a.partition.clone()), a.grp));
        for row in self.ancestry(&a.account) {
            group.push((Scope::Account(row.account.clone()), row.grp));
        }
        vec![first_set(group), first_set(per_user)]
            .into_iter()
            .flatten()
            .collect()
    }

    /// One association of the user with its limits.
    pub fn resolve(&self, a: &Assoc) -> Resolved {
        let partition = a.partition.clone().or_else(|| {
            self.partitions
                .iter()
                .find(|p| p.default)
                .map(|p| p.name.clone())
        });
        let partition_qos = partition
            .as_deref()
            .and_then(|n| self.partitions.iter().find(|p| p.name == n))
            .and_then(|p| p.qos.as_deref());
        let qos = job_qos(a);
        let mut limits = BTreeMap::new();
        for (scope, amounts) in self.candidates(a, partition_qos, &qos) {
            for r in Res::ALL {
                let Some(value) = amounts.get(r) else {
                    continue;
                };
                let used = self.used(&scope, r);
                let tighter = limits
                    .get(&r)
                    .map_or(true, |l: &Limit| value - used < l.value - l.used);
                if tighter {
                    let scope = scope.clone();
                    limits.insert(r, Limit { value, scope, used });
                }
            }
        }
        Resolved {
            account: a.account.clone(),
            partition,
            qos,
            limits,
        }
    }

    /// The user's associations, in the order listed, each resolved.
    pub fn resolve_all(&self) -> Vec<Resolved> {
        self.assocs
            .iter()
            .filter(|a| a.user == self.user)
            .map(|a| self.resolve(a))
            .collect()
    }
}

/// Per TRES, the first level that sets it: the levels given in order are
/// folded into one list of (scope, the TRES it is first to set).
fn first_set(levels: Vec<(Scope, Amounts)>) -> Vec<(Scope, Amounts)> {
    let mut taken = Amounts::default();
    let mut out = Vec::new();
    for (scope, amounts) in levels {
        let mut mine = Amounts::default();
        for r in Res::ALL {
            if taken.get(r).is_none() && amounts.get(r).is_some() {
                mine.set(r, amounts.get(r));
                taken.set(r, amounts.get(r));
            }
        }
        if mine != Amounts::default() {
            out.push((scope, mine));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::slurm_text::{parse_assoc, parse_partitions, parse_qos, parse_usage};
    use super::*;

    const ASSOC: &str = "root||||||\n\
        lab|||normal||root|cpu=40\n\
        lab-sub|||normal||lab|\n\
        lab-sub|ana||qa,qb|||\n\
        lab-sub|ana|gpu|qb|||mem=10G\n";
    const QOS: &str = "normal||\nqa|cpu=100,gres/gpu=2|cpu=30\nqb|mem=20G|\npq|gres/gpu=1|\n";
    const PARTS: &str = "PartitionName=debug Default=YES QoS=N/A\nPartitionName=gpu QoS=pq\n";
    const JOBS: &str = "lab|bo|debug|normal|R|cpu=4,mem=1G\n\
        lab-sub|ana|gpu|qb|PD|cpu=2,mem=2G\n\
        other|cy|debug|qa|R|cpu=8,mem=1G\n";

    fn resolved() -> Vec<Resolved> {
        let assocs = parse_assoc(ASSOC, "a").unwrap();
        let qos = parse_qos(QOS, "q").unwrap();
        let partitions = parse_partitions(PARTS, "p").unwrap();
        let jobs = parse_usage(JOBS, "u").unwrap();
        let s = Sources {
            user: "ana",
            assocs: &assocs,
            qos: &qos,
            partitions: &partitions,
            jobs: &jobs,
        };
        s.resolve_all()
    }

    #[test]
    fn the_job_qos_is_the_default_else_the_only_one_else_normal() {
        let r = resolved();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].qos, "normal", "two QOS and no default");
        assert_eq!(r[1].qos, "qb", "the only QOS");
        assert_eq!(
            r[0].partition.as_deref(),
            Some("debug"),
            "the default partition"
        );
    }

    #[test]
    fn each_tres_takes_the_first_level_that_sets_it() {
        let r = resolved();
        // lab-sub/ana on debug, QOS normal: only the account tree limits;
        // lab's cpu=40 counts every job in lab and lab-sub.
        let cpu = &r[0].limits[&Res::Cpu];
        assert_eq!(cpu.scope, Scope::Account("lab".into()));
        assert_eq!((cpu.value, cpu.used), (40.0, 6.0));
        assert!(!r[0].limits.contains_key(&Res::Mem));
        // on gpu: partition QOS pq sets gpus, job QOS qb sets mem (before
        // the user association's mem=10G), cpu comes from lab.
        let l = &r[1].limits;
        assert_eq!(l[&Res::Gpu].scope, Scope::QosGroup("pq".into()));
        assert_eq!(l[&Res::Mem].scope, Scope::QosGroup("qb".into()));
        assert_eq!(l[&Res::Mem].value, 20.0 * 1024.0);
        assert_eq!(l[&Res::Mem].used, 2.0 * 1024.0);
        assert_eq!(l[&Res::Cpu].scope, Scope::Account("lab".into()));
    }

    #[test]
    fn a_per_user_limit_binds_when_it_leaves_less() {
        let assocs = parse_assoc("lab|||||root|\nlab|ana||qa|||\n", "a").unwrap();
        let qos = parse_qos(QOS, "q").unwrap();
        let jobs = parse_usage(JOBS, "u").unwrap();
        let s = Sources {
            user: "ana",
            assocs: &assocs,
            qos: &qos,
            partitions: &[],
            jobs: &jobs,
        };
        let r = s.resolve_all();
        // qa: GrpTRES cpu=100 with 8 used by cy leaves 92; MaxTRESPU cpu=30
        // with none of ana's leaves 30.
        let cpu = &r[0].limits[&Res::Cpu];
        assert_eq!(cpu.scope, Scope::QosUser("qa".into()));
        assert_eq!((cpu.value, cpu.used), (30.0, 0.0));
        assert_eq!(r[0].limits[&Res::Gpu].scope, Scope::QosGroup("qa".into()));
        assert_eq!(r[0].partition, None);
    }
}
