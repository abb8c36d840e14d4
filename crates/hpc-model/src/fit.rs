//! `hpc-model fit`: per-tool (and per-user, where a user has enough jobs)
//! regressions of peak memory and CPU time on input size and CPUs, with
//! their residual quantiles, written to a JSON file for `recommend`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use argh::FromArgs;
use hpc_core::input::Input;
use hpc_core::ndjson::Rejects;
use hpc_core::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::history::{read_history, Past};
use crate::model::{self, Linear};

/// The fewest jobs (completed, with an input size) a model is fitted on.
pub const MIN_FIT: usize = 10;
/// The target of the memory model.
pub const PEAK: &str = "peak_mb";
/// The target of the CPU-time model.
pub const CPU: &str = "cpu_s";
/// The features, in the order of each model's coefficients.
pub const FEATURES: [&str; 2] = ["input_mb", "cpus"];

/// One fitted model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The tool.
    pub tool: String,
    /// The user, for a per-user model; absent for the tool's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// What it predicts (`peak_mb`, `cpu_s`).
    pub target: String,
    /// The regression and its residuals.
    #[serde(flatten)]
    pub model: Linear,
}

/// The models file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Models {
    /// The features, in coefficient order.
    pub features: Vec<String>,
    /// The models.
    pub models: Vec<Entry>,
}

impl Models {
    /// The model of `tool` for `target`: the user's own when there is one,
    /// else the tool's.
    pub fn find(&self, tool: &str, user: Option<&str>, target: &str) -> Option<&Linear> {
        let of = |u: Option<&str>| {
            self.models
                .iter()
                .find(|e| e.tool == tool && e.target == target && e.user.as_deref() == u)
        };
        user.and_then(|u| of(Some(u)))
            .or_else(|| of(None))
            .map(|e| &e.model)
    }

    /// Reads a models file.
    pub fn load(path: &Path) -> Result<Models> {
        let shown = hpc_core::paths::shown(path);
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Other(format!("cannot read {shown}: {e}")))?;
        serde_json::from_str(&text).map_err(|e| Error::Other(format!("{shown}: {e}")))
    }
}

#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "fit")]
/// Fit per-tool models of peak memory and CPU time on input size and CPUs.
pub struct FitArgs {
    /// earlier jobs: job, summary and analysis records (a file or -; default -)
    #[argh(option, default = "String::from(\"-\")")]
    history: String,
    /// where to write the models (default beside the database)
    #[argh(option)]
    models: Option<PathBuf>,
}

/// One job a model is fitted on.
struct Row<'a> {
    tool: &'a str,
    user: Option<&'a str>,
    /// The features, in [`FEATURES`] order.
    x: Vec<f64>,
    peak: f64,
    cpu_s: Option<f64>,
}

/// The completed jobs with a tool, an input size and a peak.
fn rows(jobs: &[Past]) -> Vec<Row<'_>> {
    jobs.iter()
        .filter(|p| p.state == "COMPLETED")
        .filter_map(|p| {
            Some(Row {
                tool: p.tool.as_deref()?,
                user: p.user.as_deref(),
                x: vec![p.input_mb?, f64::from(p.alloc_cpus.unwrap_or(1))],
                peak: p.peak_mb?,
                cpu_s: p.cpu_s,
            })
        })
        .collect()
}

/// Fits every tool (and tool and user) with at least [`MIN_FIT`] jobs.
/// Fails when none has, naming the most any tool had.
pub fn fit_models(jobs: &[Past]) -> Result<Models> {
    let rows = rows(jobs);
    type Key<'a> = (&'a str, Option<&'a str>);
    let mut sets: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        sets.entry((r.tool, None)).or_default().push(i);
        if let Some(u) = r.user {
            sets.entry((r.tool, Some(u))).or_default().push(i);
        }
    }
    let mut models = Vec::new();
    for ((tool, user), idx) in sets.iter().filter(|(_, v)| v.len() >= MIN_FIT) {
        let xs: Vec<Vec<f64>> = idx.iter().map(|&i| rows[i].x.clone()).collect();
        let peak: Vec<f64> = idx.iter().map(|&i| rows[i].peak).collect();
        let cpu: Vec<(Vec<f64>, f64)> = idx
            .iter()
            .filter_map(|&i| Some((rows[i].x.clone(), rows[i].cpu_s?)))
            .collect();
        let entry = |target: &str, m: Linear| Entry {
            tool: tool.to_string(),
            user: user.map(str::to_owned),
            target: target.into(),
            model: m,
        };
        models.extend(model::fit(&xs, &peak).map(|m| entry(PEAK, m)));
        if cpu.len() >= MIN_FIT {
            let (cx, cy): (Vec<Vec<f64>>, Vec<f64>) = cpu.into_iter().unzip();
            models.extend(model::fit(&cx, &cy).map(|m| entry(CPU, m)));
        }
    }
    if models.is_empty() {
        let most = sets.values().map(Vec::len).max().unwrap_or(0);
        return Err(Error::Other(format!(
            "no tool has the {MIN_FIT} completed jobs with an input size that a model needs (most: {most})"
        )));
    }
    Ok(Models {
        features: FEATURES.iter().map(|f| f.to_string()).collect(),
        models,
    })
}

/// Runs `hpc-model fit`.
pub fn main_with(args: FitArgs) -> Result<()> {
    let mut rejects = Rejects::new("hpc-model");
    let h = read_history(Input::named(&args.history)?, &mut rejects)?;
    let models = fit_models(&h.jobs)?;
    let path = args.models.unwrap_or_else(crate::recommend::default_models);
    hpc_core::paths::write_atomic(&path, |w| {
        serde_json::to_writer_pretty(&mut *w, &models)?;
        writeln!(w)?;
        Ok(())
    })?;
    rejects.finish(h.lines)
}
