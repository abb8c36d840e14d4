//! Efficiency reports from the jobs table: jobs, CPU, memory and GPU
//! hours, efficiencies and waste, grouped by user, account, group,
//! partition, node, state or tool. [`Store::report_partials`] (or
//! hpc-store's Parquet reader) sums each raw key; [`finish`] maps raw keys
//! to report keys (a user to its group, a node list to its nodes); a
//! [`Row`] computes the efficiencies and is written as a `report` record
//! ([`Row::record`]), the same for hpc-store and hpc-web.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::query::{GroupKey, Partial, RawRow};
use crate::store::{JobFilter, Store};

/// What a report groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The submitting user.
    User,
    /// The account charged.
    Account,
    /// The user's group from the mapping file, else the account.
    Group,
    /// The partition.
    Partition,
    /// Each node of the job's node list (hours split evenly over its nodes).
    Node,
    /// The normalised state.
    State,
    /// The tool from an `analysis` record of the job, else the job name.
    Tool,
}

impl std::str::FromStr for By {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<By, String> {
        By::ALL.into_iter().find(|b| b.name() == s).ok_or_else(|| {
            let names: Vec<&str> = By::ALL.iter().map(|b| b.name()).collect();
            format!("'{s}': not one of {}", names.join(", "))
        })
    }
}

impl By {
    /// Every grouping, in the order reports list them.
    pub const ALL: [By; 7] = [
        By::User,
        By::Account,
        By::Group,
        By::Partition,
        By::Node,
        By::State,
        By::Tool,
    ];

    /// The column name of the key in the output.
    pub fn name(self) -> &'static str {
        match self {
            By::User => "user",
            By::Account => "account",
            By::Group => "group",
            By::Partition => "partition",
            By::Node => "node",
            By::State => "state",
            By::Tool => "tool",
        }
    }
}

/// One line of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The group's key.
    pub key: String,
    /// The sums.
    pub sums: Partial,
}

impl Row {
    /// CPU efficiency in percent, over jobs with known CPU use.
    pub fn cpu_eff(&self) -> Option<f64> {
        (self.sums.cpu_h_known > 0.0).then(|| 100.0 * self.sums.cpu_used_h / self.sums.cpu_h_known)
    }
    /// GPU efficiency in percent (the GPU-hours-weighted mean utilisation),
    /// over jobs with a known GPU utilisation.
    pub fn gpu_eff(&self) -> Option<f64> {
        (self.sums.gpu_h_known > 0.0).then(|| 100.0 * self.sums.gpu_used_h / self.sums.gpu_h_known)
    }
    /// GPU-hours reserved and not used, over jobs with a known GPU
    /// utilisation.
    pub fn gpu_wasted_h(&self) -> Option<f64> {
        (self.sums.gpu_h_known > 0.0)
            .then(|| (self.sums.gpu_h_known - self.sums.gpu_used_h).max(0.0))
    }
    /// Memory efficiency in percent, over jobs with a known peak.
    pub fn mem_eff(&self) -> Option<f64> {
        (self.sums.mem_gbh_known > 0.0).then(|| {
            100.0 * (self.sums.mem_gbh_known - self.sums.mem_wasted_gbh) / self.sums.mem_gbh_known
        })
    }

    /// The values of [`COLUMNS`], in their order.
    pub fn values(&self) -> [Option<f64>; 10] {
        let s = &self.sums;
        [
            Some(s.jobs),
            Some(s.cpu_h),
            self.cpu_eff(),
            Some(s.cpu_wasted_h),
            Some(s.mem_gbh),
            self.mem_eff(),
            Some(s.mem_wasted_gbh),
            Some(s.gpu_h),
            self.gpu_eff(),
            self.gpu_wasted_h(),
        ]
    }

    /// The row as a `report` record grouped `by`: `kind`, `by`, the key
    /// under the grouping's name, then [`COLUMNS`] (jobs whole, the rest to
    /// six decimals, null when unknown).
    pub fn record(&self, by: By) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("kind".into(), "report".into());
        m.insert("by".into(), by.name().into());
        m.insert(by.name().into(), self.key.clone().into());
        for (c, v) in COLUMNS.iter().zip(self.values()) {
            let v = match v {
                None => Value::Null,
                Some(x) if *c == "jobs" => Value::from(x.round() as i64),
                Some(x) => Value::from(hpc_core::num::round6(x)),
            };
            m.insert((*c).into(), v);
        }
        m
    }
}

/// The data columns of a report, after the key.
pub const COLUMNS: [&str; 10] = [
    "jobs",
    "cpu_h",
    "cpu_eff",
    "cpu_wasted_h",
    "mem_gbh",
    "mem_eff",
    "mem_wasted_gbh",
    "gpu_h",
    "gpu_eff",
    "gpu_wasted_h",
];

/// user -> group, from a mapping file.
pub type Groups = HashMap<String, String>;

impl By {
    /// The raw key the database groups by before [`finish`] maps it: a
    /// group is found from its user, a node from its node list.
    pub fn group_key(self) -> GroupKey {
        match self {
            By::User | By::Group => GroupKey::User,
            By::Account => GroupKey::Account,
            By::Partition => GroupKey::Partition,
            By::Node => GroupKey::NodeList,
            By::State => GroupKey::State,
            By::Tool => GroupKey::Tool,
        }
    }
}

/// Reads a user-to-group mapping: one `user group` pair a line (separated by
/// whitespace, `,` or `:`), `#` comments and blank lines ignored.
pub fn read_groups(path: &Path) -> Result<Groups> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::other(format!("cannot read {}: {e}", path.display())))?;
    let mut g = Groups::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line
            .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
            .filter(|p| !p.is_empty());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(u), Some(grp), None) => {
                g.insert(u.to_string(), grp.to_string());
            }
            _ => {
                return Err(Error::other(format!(
                    "{}: line {}: expected 'user group'",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(g)
}

impl Store {
    /// The report of the jobs passing `filter` grouped `by` ([`finish`] of
    /// [`Store::report_partials`]).
    pub fn report(&self, by: By, groups: &Groups, filter: &JobFilter) -> Result<(Vec<Row>, u64)> {
        let raw = self.report_partials(by.group_key(), by == By::Group, filter)?;
        Ok(finish(by, raw, groups))
    }
}

/// The key shown for jobs without a value.
pub const NONE_KEY: &str = "(none)";

/// The row under which `--by node` counts jobs whose node list cannot be read.
pub const BAD_NODE_KEY: &str = "(bad node list)";

/// The most nodes one job's node list may name in `--by node`.
pub const MAX_JOB_NODES: usize = 100_000;

/// Maps raw rows to report rows, sorted by CPU-hours (largest first), then
/// key. With `--by node`, a node list that cannot be read (or names more
/// than [`MAX_JOB_NODES`]) is reported on stderr and its jobs counted under
/// [`BAD_NODE_KEY`]; the second value is how many such lists there were.
pub fn finish(by: By, raw: Vec<RawRow>, groups: &Groups) -> (Vec<Row>, u64) {
    let mut acc: BTreeMap<String, Partial> = BTreeMap::new();
    let mut unsplit = 0;
    for r in raw {
        match by {
            By::Node => {
                let hosts = match &r.key {
                    Some(list) => match hpc_core::slurm::expand_hostlist(list, MAX_JOB_NODES) {
                        Ok(h) => h,
                        Err(e) => {
                            hpc_core::note!(
                                "report: node list '{}' of {} jobs: {}",
                                hpc_core::paths::escaped(list),
                                r.sums.jobs,
                                hpc_core::paths::escaped(&e)
                            );
                            unsplit += 1;
                            acc.entry(BAD_NODE_KEY.into())
                                .or_default()
                                .add_scaled(&r.sums, 1.0);
                            continue;
                        }
                    },
                    None => Vec::new(),
                };
                if hosts.is_empty() {
                    acc.entry(NONE_KEY.into())
                        .or_default()
                        .add_scaled(&r.sums, 1.0);
                    continue;
                }
                // Every node counts the job; hours are split evenly.
                let w = 1.0 / hosts.len() as f64;
                for h in hosts {
                    acc.entry(h).or_default().add_scaled(&r.sums, w);
                }
            }
            By::Group => {
                let key = r
                    .key
                    .as_ref()
                    .and_then(|u| groups.get(u).cloned())
                    .or(r.account.clone())
                    .unwrap_or_else(|| NONE_KEY.into());
                acc.entry(key).or_default().add_scaled(&r.sums, 1.0);
            }
            _ => {
                // An empty value (a job named "") is no value either.
                let key = r
                    .key
                    .filter(|k| !k.trim().is_empty())
                    .unwrap_or_else(|| NONE_KEY.into());
                acc.entry(key).or_default().add_scaled(&r.sums, 1.0);
            }
        }
    }
    let mut rows: Vec<Row> = acc
        .into_iter()
        .map(|(key, sums)| Row { key, sums })
        .collect();
    rows.sort_by(|a, b| {
        b.sums
            .cpu_h
            .partial_cmp(&a.sums.cpu_h)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.key.cmp(&b.key))
    });
    (rows, unsplit)
}
