//! The job's GPUs: which ones are the job's ([`wanted`]), and what each did,
//! read through a [`GpuSource`]: NVML, loaded at run time ([`NvmlSource`]),
//! or readings recorded from it and replayed ([`FixtureSource`], for tests
//! and benches, chosen by [`FIXTURE_ENV`]).
//!
//! Without the NVIDIA library the source cannot be opened: the probe then
//! writes no GPU field at all (never a 0) and says why in its meta.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use hpc_core::num::round6;
use hpc_core::record::{Gpu, Sample};
use serde::Deserialize;
use serde_json::{json, Value};

/// The environment variable naming a file of recorded NVML readings to
/// replay instead of NVML (for tests; documented in the man page).
pub const FIXTURE_ENV: &str = "HPC_PROBE_GPU_FIXTURE";

const MB: f64 = 1024.0 * 1024.0;

/// What does not change about a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// NVML's index.
    pub index: u32,
    /// The device file's minor number (`/dev/nvidiaN`), which SLURM's GPU
    /// ids name.
    pub minor: Option<u32>,
    /// `GPU-...` (or `MIG-...`).
    pub uuid: String,
    /// The model name.
    pub name: String,
    /// The GPU's memory, bytes.
    pub mem_total: u64,
}

/// One reading of one GPU, in NVML's units. A value the driver did not
/// give is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Utilisation, percent (`nvmlDeviceGetUtilizationRates`, `gpu`).
    pub util: Option<u32>,
    /// Memory used, bytes.
    pub mem_used: Option<u64>,
    /// Memory, bytes.
    pub mem_total: Option<u64>,
    /// Power draw, milliwatts.
    pub power_mw: Option<u32>,
    /// The pids of the processes running on it (compute and graphics).
    pub pids: Option<Vec<u32>>,
}

/// Where the sampler reads GPUs from.
pub trait GpuSource {
    /// What the source is called in the meta (`nvml`, `fixture`).
    fn name(&self) -> &'static str;
    /// The GPUs of the node.
    fn devices(&mut self) -> Result<Vec<Device>, String>;
    /// One reading of the GPU with NVML index `index`.
    fn read(&mut self, index: u32) -> Reading;
}

/// NVML, loaded at run time (`libnvidia-ml.so.1`).
pub struct NvmlSource {
    nvml: nvml_wrapper::Nvml,
}

impl NvmlSource {
    /// Loads and initialises NVML; an error (no library, no driver) says why.
    pub fn open() -> Result<Self, String> {
        nvml_wrapper::Nvml::init()
            .map(|nvml| NvmlSource { nvml })
            .map_err(|e| format!("NVML not available: {e}"))
    }
}

impl GpuSource for NvmlSource {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn devices(&mut self) -> Result<Vec<Device>, String> {
        let n = self.nvml.device_count().map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(n as usize);
        let mut last_err = None;
        for index in 0..n {
            // A GPU outside the job's cgroup cannot be opened: skip it.
            let d = match self.nvml.device_by_index(index) {
                Ok(d) => d,
                Err(e) => {
                    last_err = Some(format!("GPU {index}: {e}"));
                    continue;
                }
            };
            out.push(Device {
                index,
                minor: d.minor_number().ok(),
                uuid: d.uuid().unwrap_or_default(),
                name: d.name().unwrap_or_default(),
                mem_total: d.memory_info().map_or(0, |m| m.total),
            });
        }
        match last_err {
            Some(e) if out.is_empty() => Err(e),
            _ => Ok(out),
        }
    }

    fn read(&mut self, index: u32) -> Reading {
        let Ok(d) = self.nvml.device_by_index(index) else {
            return Reading::default();
        };
        let mem = d.memory_info().ok();
        let pids = match (
            d.running_compute_processes(),
            d.running_graphics_processes(),
        ) {
            (Err(_), Err(_)) => None,
            (c, g) => Some(
                c.into_iter()
                    .chain(g)
                    .flatten()
                    .map(|p| p.pid)
                    .collect::<Vec<u32>>(),
            ),
        };
        Reading {
            util: d.utilization_rates().ok().map(|u| u.gpu),
            mem_used: mem.as_ref().map(|m| m.used),
            mem_total: mem.as_ref().map(|m| m.total),
            power_mw: d.power_usage().ok(),
            pids,
        }
    }
}

/// One line of a fixture: one GPU's reading, with the names and units of
/// NVML's API (bytes, milliwatts, percent).
#[derive(Debug, Clone, Deserialize)]
struct FixtureLine {
    index: u32,
    #[serde(default)]
    minor_number: Option<u32>,
    #[serde(default)]
    uuid: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    memory_info: Option<MemoryInfo>,
    #[serde(default)]
    utilization_rates: Option<Utilization>,
    #[serde(default)]
    power_usage: Option<u32>,
    #[serde(default)]
    running_compute_processes: Option<Vec<ProcessInfo>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct MemoryInfo {
    total: u64,
    used: u64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct Utilization {
    gpu: u32,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct ProcessInfo {
    pid: u32,
}

/// Recorded readings replayed in order: the file holds one JSON object a
/// line, one GPU's reading each; the n-th read of a GPU gives its n-th
/// line, and its last line again once they run out.
pub struct FixtureSource {
    devices: Vec<Device>,
    lines: HashMap<u32, VecDeque<FixtureLine>>,
}

impl FixtureSource {
    /// Reads a fixture's text; an error names the bad line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut devices: Vec<Device> = Vec::new();
        let mut lines: HashMap<u32, VecDeque<FixtureLine>> = HashMap::new();
        for (i, l) in text.lines().enumerate() {
            if l.trim().is_empty() {
                continue;
            }
            let f: FixtureLine =
                serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
            if !devices.iter().any(|d| d.index == f.index) {
                devices.push(Device {
                    index: f.index,
                    minor: f.minor_number,
                    uuid: f.uuid.clone(),
                    name: f.name.clone(),
                    mem_total: f.memory_info.map_or(0, |m| m.total),
                });
            }
            lines.entry(f.index).or_default().push_back(f);
        }
        Ok(FixtureSource { devices, lines })
    }

    /// Reads a fixture file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: {e}", hpc_core::paths::shown(path)))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", hpc_core::paths::shown(path)))
    }
}

impl GpuSource for FixtureSource {
    fn name(&self) -> &'static str {
        "fixture"
    }

    fn devices(&mut self) -> Result<Vec<Device>, String> {
        Ok(self.devices.clone())
    }

    fn read(&mut self, index: u32) -> Reading {
        let Some(q) = self.lines.get_mut(&index) else {
            return Reading::default();
        };
        let f = if q.len() > 1 {
            q.pop_front()
        } else {
            q.front().cloned()
        };
        let Some(f) = f else {
            return Reading::default();
        };
        Reading {
            util: f.utilization_rates.map(|u| u.gpu),
            mem_used: f.memory_info.map(|m| m.used),
            mem_total: f.memory_info.map(|m| m.total),
            power_mw: f.power_usage,
            pids: f
                .running_compute_processes
                .map(|v| v.iter().map(|p| p.pid).collect()),
        }
    }
}

/// Opens the GPU source: the fixture named by [`FIXTURE_ENV`] when set,
/// else NVML.
pub fn open_source(get: impl Fn(&str) -> Option<String>) -> Result<Box<dyn GpuSource>, String> {
    match get(FIXTURE_ENV).filter(|p| !p.is_empty()) {
        Some(p) => Ok(Box::new(FixtureSource::load(Path::new(&p))?)),
        None => Ok(Box::new(NvmlSource::open()?)),
    }
}

/// How a GPU is named in a list of the job's GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id {
    /// SLURM's GPU id: the device file's minor number.
    Minor(u32),
    /// An NVML index (`CUDA_VISIBLE_DEVICES` outside SLURM).
    Index(u32),
    /// A UUID (`GPU-...`, `MIG-...`).
    Uuid(String),
}

/// Which GPUs the probe reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// None: the job has no GPU (or none may be read).
    None,
    /// These, and where the list came from.
    Some(Vec<Id>, &'static str),
    /// Every GPU of the node (a command or pid outside SLURM, with no
    /// `CUDA_VISIBLE_DEVICES`).
    All,
}

/// Parses a GPU list such as `0,1`, `GPU-8f1c...,GPU-02ab...` or `0-3`;
/// numbers become `num(n)`. An empty list or `NoDevFiles` is none.
pub fn parse_ids(s: &str, num: fn(u32) -> Id) -> Option<Vec<Id>> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("NoDevFiles") {
        return None;
    }
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-').filter(|_| !part.contains("GPU")) {
            match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if a <= b && b - a < 1024 => out.extend((a..=b).map(num)),
                _ => out.push(Id::Uuid(part.to_owned())),
            }
        } else if let Ok(n) = part.parse::<u32>() {
            out.push(num(n));
        } else {
            out.push(Id::Uuid(part.to_owned()));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The minor numbers of the NVIDIA GPUs a cgroup v1 `devices.list`
/// allows (`c 195:N rwm`; 255 is `nvidiactl`). `None` when it allows every
/// device (`a *:* rwm`).
pub fn minors_from_devices_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for l in text.lines() {
        let mut w = l.split_whitespace();
        let (Some(kind), Some(dev)) = (w.next(), w.next()) else {
            continue;
        };
        if kind == "a" {
            return None;
        }
        if let Some(("195", m)) = dev.split_once(':') {
            if let Ok(m) = m.parse::<u32>() {
                if m < 255 {
                    out.push(m);
                }
            }
        }
    }
    Some(out)
}

/// The job's GPUs: `SLURM_JOB_GPUS`, else `SLURM_STEP_GPUS`, else
/// `CUDA_VISIBLE_DEVICES`, else the job cgroup's v1 device list
/// (`devices_list`, its text); in a SLURM job with none of them, no GPU;
/// outside SLURM, every GPU.
pub fn wanted(get: impl Fn(&str) -> Option<String>, devices_list: Option<&str>) -> Wanted {
    for (var, num) in [
        ("SLURM_JOB_GPUS", Id::Minor as fn(u32) -> Id),
        ("SLURM_STEP_GPUS", Id::Minor),
        ("CUDA_VISIBLE_DEVICES", Id::Index),
    ] {
        if let Some(v) = get(var) {
            return match parse_ids(&v, num) {
                Some(ids) => Wanted::Some(ids, var),
                None => Wanted::None,
            };
        }
    }
    if let Some(m) = devices_list.and_then(minors_from_devices_list) {
        return if m.is_empty() {
            Wanted::None
        } else {
            Wanted::Some(m.into_iter().map(Id::Minor).collect(), "cgroup")
        };
    }
    if get("SLURM_JOB_ID").is_some_and(|v| !v.is_empty()) {
        Wanted::None
    } else {
        Wanted::All
    }
}

fn matches(d: &Device, id: &Id) -> bool {
    match id {
        Id::Minor(m) => d.minor.unwrap_or(d.index) == *m,
        Id::Index(i) => d.index == *i,
        Id::Uuid(u) => d.uuid == *u,
    }
}

/// The job's GPUs being read, and the per-GPU records of the last sample.
pub struct Gpus {
    source: Box<dyn GpuSource>,
    devices: Vec<Device>,
    records: Vec<Gpu>,
}

/// What the meta says of the GPUs.
pub fn meta_fields(gpus: &Result<Gpus, String>, extra: &mut serde_json::Map<String, Value>) {
    match gpus {
        Ok(g) => {
            extra.insert("gpu_source".into(), Value::from(g.source.name()));
            let list: Vec<Value> = g
                .devices
                .iter()
                .map(|d| {
                    json!({
                        "index": d.index,
                        "uuid": d.uuid,
                        "name": d.name,
                        "mem_total_mb": round6(d.mem_total as f64 / MB),
                    })
                })
                .collect();
            extra.insert("gpus".into(), Value::Array(list));
        }
        Err(why) => {
            extra.insert("gpu_reason".into(), Value::from(why.as_str()));
        }
    }
}

impl Gpus {
    /// The wanted GPUs of `source`. An error when there are none to read
    /// (none wanted, none found, the source failed), saying why.
    pub fn new(mut source: Box<dyn GpuSource>, wanted: &Wanted) -> Result<Gpus, String> {
        let all = source.devices()?;
        let devices: Vec<Device> = match wanted {
            Wanted::None => return Err("the job has no GPU".into()),
            Wanted::All => all,
            Wanted::Some(ids, _) => all
                .into_iter()
                .filter(|d| ids.iter().any(|id| matches(d, id)))
                .collect(),
        };
        if devices.is_empty() {
            let from = match wanted {
                Wanted::Some(_, var) => format!(" of {var}"),
                _ => String::new(),
            };
            return Err(format!("no GPU{from} found by {}", source.name()));
        }
        Ok(Gpus {
            source,
            devices,
            records: Vec::new(),
        })
    }

    /// The GPUs read.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Reads every GPU: the job-wide fields go on `s`, the per-GPU records
    /// are kept for [`Gpus::records`]. `job_pids` are the watched
    /// processes, counted on each GPU.
    pub fn read_into(&mut self, s: &mut Sample, job_pids: &HashSet<u32>) {
        self.records.clear();
        let (mut util, mut n_util) = (0.0, 0u32);
        let mut sums: [Option<f64>; 3] = [None; 3];
        let add = |slot: &mut Option<f64>, v: Option<f64>| {
            if let Some(v) = v {
                *slot = Some(slot.unwrap_or(0.0) + v);
            }
        };
        for d in &self.devices {
            let r = self.source.read(d.index);
            let g = Gpu {
                t: s.t,
                host: s.host.clone(),
                job_id: s.job_id.clone(),
                gpu_index: Some(d.index),
                gpu_uuid: (!d.uuid.is_empty()).then(|| d.uuid.clone()),
                gpu_util: r.util.map(f64::from),
                gpu_mem_mb: r.mem_used.map(|b| round6(b as f64 / MB)),
                gpu_mem_total_mb: r
                    .mem_total
                    .or((d.mem_total > 0).then_some(d.mem_total))
                    .map(|b| round6(b as f64 / MB)),
                gpu_power_w: r.power_mw.map(|p| round6(f64::from(p) / 1000.0)),
                gpu_procs: r.pids.as_ref().map(|p| {
                    let n = p.iter().filter(|pid| job_pids.contains(pid)).count();
                    u32::try_from(n).unwrap_or(u32::MAX)
                }),
            };
            if let Some(u) = g.gpu_util {
                util += u;
                n_util += 1;
            }
            add(&mut sums[0], g.gpu_mem_mb);
            add(&mut sums[1], g.gpu_mem_total_mb);
            add(&mut sums[2], g.gpu_power_w);
            self.records.push(g);
        }
        s.gpu_util = (n_util > 0).then(|| round6(util / f64::from(n_util)));
        s.gpu_mem_mb = sums[0].map(round6);
        s.gpu_mem_total_mb = sums[1].map(round6);
        s.gpu_power_w = sums[2].map(round6);
    }

    /// The per-GPU records of the last [`Gpus::read_into`].
    pub fn records(&self) -> &[Gpu] {
        &self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"{"index":0,"minor_number":0,"uuid":"GPU-a","name":"NVIDIA A100-SXM4-80GB","memory_info":{"total":85899345920,"free":82754000000,"used":3145728000},"utilization_rates":{"gpu":90,"memory":40},"power_usage":250000,"running_compute_processes":[{"pid":7,"used_gpu_memory":3145728000}]}
{"index":1,"minor_number":1,"uuid":"GPU-b","name":"NVIDIA A100-SXM4-80GB","memory_info":{"total":85899345920,"free":85899345920,"used":0},"utilization_rates":{"gpu":0,"memory":0},"power_usage":60000,"running_compute_processes":[]}
{"index":0,"minor_number":0,"uuid":"GPU-a","name":"NVIDIA A100-SXM4-80GB","memory_info":{"total":85899345920,"free":80000000000,"used":5899345920},"utilization_rates":{"gpu":70,"memory":40},"power_usage":300000,"running_compute_processes":[{"pid":7,"used_gpu_memory":5899345920},{"pid":99,"used_gpu_memory":1}]}
"#;

    #[test]
    fn a_fixture_replays_each_gpu_in_order_then_holds_the_last() {
        let mut f = FixtureSource::parse(TWO).unwrap();
        let d = f.devices().unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!((d[1].index, d[1].uuid.as_str()), (1, "GPU-b"));
        assert_eq!(f.read(0).util, Some(90));
        assert_eq!(f.read(0).util, Some(70));
        assert_eq!(f.read(0).util, Some(70), "the last reading holds");
        assert_eq!(f.read(1).pids, Some(vec![]));
        assert_eq!(f.read(5), Reading::default());
        let e = FixtureSource::parse("{\"index\":0}\nnot json\n")
            .err()
            .unwrap();
        assert!(e.starts_with("line 2:"), "{e}");
    }

    #[test]
    fn job_wide_fields_are_the_mean_utilisation_and_summed_memory() {
        let src = Box::new(FixtureSource::parse(TWO).unwrap());
        let mut g = Gpus::new(src, &Wanted::All).unwrap();
        let mut s = Sample {
            t: 5.0,
            ..Default::default()
        };
        let job: HashSet<u32> = [7].into_iter().collect();
        g.read_into(&mut s, &job);
        assert_eq!(s.gpu_util, Some(45.0));
        assert_eq!(s.gpu_mem_mb, Some(3000.0));
        assert_eq!(s.gpu_mem_total_mb, Some(163840.0));
        assert_eq!(s.gpu_power_w, Some(310.0));
        let r = g.records();
        assert_eq!(r.len(), 2, "the untouched GPU is reported too");
        assert_eq!((r[0].gpu_procs, r[1].gpu_procs), (Some(1), Some(0)));
        assert_eq!(r[1].gpu_util, Some(0.0));
        g.read_into(&mut s, &job);
        assert_eq!(g.records()[0].gpu_procs, Some(1), "pid 99 is not the job's");
    }

    #[test]
    fn the_job_gpus_come_from_slurm_then_cuda_then_the_cgroup() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let w = wanted(
            env(&[("SLURM_JOB_GPUS", "1,3"), ("CUDA_VISIBLE_DEVICES", "0,1")]),
            None,
        );
        assert_eq!(
            w,
            Wanted::Some(vec![Id::Minor(1), Id::Minor(3)], "SLURM_JOB_GPUS")
        );
        let w = wanted(env(&[("CUDA_VISIBLE_DEVICES", "GPU-x,2-3")]), None);
        assert_eq!(
            w,
            Wanted::Some(
                vec![Id::Uuid("GPU-x".into()), Id::Index(2), Id::Index(3)],
                "CUDA_VISIBLE_DEVICES"
            )
        );
        assert_eq!(
            wanted(env(&[("CUDA_VISIBLE_DEVICES", "")]), None),
            Wanted::None
        );
        let list = "c 1:3 rwm\nc 195:2 rw\nc 195:255 rw\n";
        assert_eq!(
            wanted(env(&[("SLURM_JOB_ID", "9")]), Some(list)),
            Wanted::Some(vec![Id::Minor(2)], "cgroup")
        );
        assert_eq!(wanted(env(&[("SLURM_JOB_ID", "9")]), None), Wanted::None);
        assert_eq!(wanted(env(&[]), Some("a *:* rwm\n")), Wanted::All);
    }

    #[test]
    fn only_the_wanted_gpus_are_read() {
        let src = Box::new(FixtureSource::parse(TWO).unwrap());
        let g = Gpus::new(src, &Wanted::Some(vec![Id::Uuid("GPU-b".into())], "x")).unwrap();
        assert_eq!(g.devices().len(), 1);
        let src = Box::new(FixtureSource::parse(TWO).unwrap());
        let e = Gpus::new(src, &Wanted::Some(vec![Id::Minor(7)], "SLURM_JOB_GPUS")).err();
        assert_eq!(
            e.as_deref(),
            Some("no GPU of SLURM_JOB_GPUS found by fixture")
        );
    }
}
