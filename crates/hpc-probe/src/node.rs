//! Node-level sources: NUMA, Lustre client, RAPL energy and InfiniBand.
//! Each is found once at start; a reading gives cumulative counters and the
//! sampler turns two readings into rates.

use std::fs;
use std::path::{Path, PathBuf};

use crate::parse;

/// The node-level files found under the `/proc` and `/sys` roots.
#[derive(Debug, Default, Clone)]
pub struct NodeSources {
    /// `sys/devices/system/node/node*/numastat`.
    pub numa: Vec<PathBuf>,
    /// llite `stats` files (`proc/fs/lustre/llite/*/stats`, or under
    /// `sys/kernel/debug/lustre/llite`).
    pub lustre: Vec<PathBuf>,
    /// Top-level RAPL package domains: `(energy_uj, max_energy_range_uj)`.
    pub rapl: Vec<(PathBuf, Option<u64>)>,
    /// InfiniBand ports: `(rcv file, xmit file)`, 64-bit counters preferred.
    pub ib: Vec<(PathBuf, PathBuf)>,
}

/// One reading of the node counters (absent when no source was found).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NodeReading {
    /// Per node `(numa_hit, numa_miss)`.
    pub numa: Vec<Option<(u64, u64)>>,
    /// Per llite file.
    pub lustre: Vec<Option<parse::Llite>>,
    /// Per RAPL domain, microjoules.
    pub rapl: Vec<Option<u64>>,
    /// Per IB port `(rcv, xmit)` in bytes.
    pub ib: Vec<Option<(u64, u64)>>,
}

/// Rates between two node readings.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct NodeRates {
    /// numa_miss / (numa_hit + numa_miss) over the interval.
    pub numa_miss_rate: Option<f64>,
    /// Lustre MiB/s read.
    pub lustre_read_mbps: Option<f64>,
    /// Lustre MiB/s written.
    pub lustre_write_mbps: Option<f64>,
    /// Lustre metadata operations per second.
    pub lustre_meta_ops: Option<f64>,
    /// Joules used over the interval (all packages).
    pub energy_j: Option<f64>,
    /// Watts over the interval.
    pub power_w: Option<f64>,
    /// IB MiB/s received.
    pub ib_rx_mbps: Option<f64>,
    /// IB MiB/s sent.
    pub ib_tx_mbps: Option<f64>,
}

const MB: f64 = 1024.0 * 1024.0;

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    v.sort();
    v
}

fn name_of(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// Whether a powercap entry is a top-level RAPL domain (`intel-rapl:0`,
/// not the subdomain `intel-rapl:0:0` nor the control type `intel-rapl`).
pub fn is_rapl_package(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("intel-rapl:")
        .or_else(|| name.strip_prefix("intel-rapl-mmio:"))
    else {
        return false;
    };
    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
}

impl NodeSources {
    /// Finds the sources under the two roots.
    pub fn discover(proc_root: &Path, sys_root: &Path) -> Self {
        let mut s = NodeSources::default();
        for d in sorted_entries(&sys_root.join("devices/system/node")) {
            let n = name_of(&d);
            if n.starts_with("node") && n[4..].bytes().all(|b| b.is_ascii_digit()) {
                let f = d.join("numastat");
                if f.is_file() {
                    s.numa.push(f);
                }
            }
        }
        for base in [
            proc_root.join("fs/lustre/llite"),
            sys_root.join("kernel/debug/lustre/llite"),
        ] {
            for d in sorted_entries(&base) {
                let f = d.join("stats");
                if f.is_file()
                    && !s
                        .lustre
                        .iter()
                        .any(|o| name_of(o.parent().unwrap_or(o)) == name_of(&d))
                {
                    s.lustre.push(f);
                }
            }
        }
        let mut buf = Vec::new();
        for d in sorted_entries(&sys_root.join("class/powercap")) {
            if !is_rapl_package(name_of(&d)) {
                continue;
            }
            let f = d.join("energy_uj");
            if !f.is_file() {
                continue;
            }
            let max = if crate::read_into(&d.join("max_energy_range_uj"), &mut buf) {
                parse::parse_single(&buf)
            } else {
                None
            };
            s.rapl.push((f, max));
        }
        for dev in sorted_entries(&sys_root.join("class/infiniband")) {
            for port in sorted_entries(&dev.join("ports")) {
                let pick = |name: &str| -> Option<PathBuf> {
                    let ext = port.join("counters_ext").join(format!("{name}_64"));
                    if ext.is_file() {
                        return Some(ext);
                    }
                    let plain = port.join("counters").join(name);
                    plain.is_file().then_some(plain)
                };
                if let (Some(r), Some(x)) = (pick("port_rcv_data"), pick("port_xmit_data")) {
                    s.ib.push((r, x));
                }
            }
        }
        s
    }

    /// Reads every counter once.
    pub fn read(&self, buf: &mut Vec<u8>) -> NodeReading {
        let single = |p: &Path, buf: &mut Vec<u8>| -> Option<u64> {
            if crate::read_into(p, buf) {
                parse::parse_single(buf)
            } else {
                None
            }
        };
        NodeReading {
            numa: self
                .numa
                .iter()
                .map(|p| {
                    if crate::read_into(p, buf) {
                        parse::parse_numastat(buf)
                    } else {
                        None
                    }
                })
                .collect(),
            lustre: self
                .lustre
                .iter()
                .map(|p| crate::read_into(p, buf).then(|| parse::parse_llite_stats(buf)))
                .collect(),
            rapl: self.rapl.iter().map(|(p, _)| single(p, buf)).collect(),
            ib: self
                .ib
                .iter()
                .map(|(r, x)| {
                    let r = single(r, buf)?;
                    let x = single(x, buf)?;
                    // The data counters count 4-byte words.
                    Some((r.saturating_mul(4), x.saturating_mul(4)))
                })
                .collect(),
        }
    }

    /// The rates between two readings `dt` seconds apart. A source with no
    /// readable pair gives no field.
    pub fn rates(&self, a: &NodeReading, b: &NodeReading, dt: f64) -> NodeRates {
        let mut r = NodeRates::default();
        if dt <= 0.0 {
            return r;
        }
        let pairs = |x: &[Option<(u64, u64)>], y: &[Option<(u64, u64)>]| -> Option<(u64, u64)> {
            let mut any = false;
            let (mut s0, mut s1) = (0u64, 0u64);
            for (p, q) in x.iter().zip(y) {
                if let (Some(p), Some(q)) = (p, q) {
                    any = true;
                    s0 = s0.saturating_add(parse::counter_delta(p.0, q.0, None));
                    s1 = s1.saturating_add(parse::counter_delta(p.1, q.1, None));
                }
            }
            any.then_some((s0, s1))
        };
        if let Some((hit, miss)) = pairs(&a.numa, &b.numa) {
            if hit > 0 || miss > 0 {
                r.numa_miss_rate = Some(miss as f64 / (hit as f64 + miss as f64));
            } else {
                r.numa_miss_rate = Some(0.0);
            }
        }
        let mut lus: Option<(u64, u64, u64)> = None;
        for (p, q) in a.lustre.iter().zip(&b.lustre) {
            if let (Some(p), Some(q)) = (p, q) {
                let t = lus.get_or_insert((0, 0, 0));
                let d = |a: u64, b: u64| parse::counter_delta(a, b, None);
                t.0 = t.0.saturating_add(d(p.read_bytes, q.read_bytes));
                t.1 = t.1.saturating_add(d(p.write_bytes, q.write_bytes));
                t.2 = t.2.saturating_add(d(p.meta_ops, q.meta_ops));
            }
        }
        if let Some((rd, wr, ops)) = lus {
            r.lustre_read_mbps = Some(rd as f64 / MB / dt);
            r.lustre_write_mbps = Some(wr as f64 / MB / dt);
            r.lustre_meta_ops = Some(ops as f64 / dt);
        }
        let mut uj: Option<u64> = None;
        for ((p, q), (_, max)) in a.rapl.iter().zip(&b.rapl).zip(&self.rapl) {
            if let (Some(p), Some(q)) = (p, q) {
                let sum = uj.get_or_insert(0);
                *sum = sum.saturating_add(parse::counter_delta(*p, *q, *max));
            }
        }
        if let Some(uj) = uj {
            let j = uj as f64 / 1e6;
            r.energy_j = Some(j);
            r.power_w = Some(j / dt);
        }
        if let Some((rx, tx)) = pairs(&a.ib, &b.ib) {
            r.ib_rx_mbps = Some(rx as f64 / MB / dt);
            r.ib_tx_mbps = Some(tx as f64 / MB / dt);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rapl_packages_only() {
        assert!(is_rapl_package("intel-rapl:0"));
        assert!(is_rapl_package("intel-rapl:12"));
        assert!(!is_rapl_package("intel-rapl:0:0"));
        assert!(!is_rapl_package("intel-rapl"));
        assert!(!is_rapl_package("intel-rapl:"));
        assert!(is_rapl_package("intel-rapl-mmio:0"));
    }

    #[test]
    fn ib_prefers_64_bit_counters_and_counts_words() {
        let d = tempfile::tempdir().unwrap();
        let port = d.path().join("class/infiniband/mlx4_0/ports/1");
        fs::create_dir_all(port.join("counters")).unwrap();
        fs::create_dir_all(port.join("counters_ext")).unwrap();
        fs::write(port.join("counters/port_rcv_data"), "4294967295\n").unwrap();
        fs::write(port.join("counters/port_xmit_data"), "4294967295\n").unwrap();
        fs::write(port.join("counters_ext/port_rcv_data_64"), "10000000000\n").unwrap();
        fs::write(port.join("counters_ext/port_xmit_data_64"), "20000000000\n").unwrap();
        let port2 = d.path().join("class/infiniband/mlx5_0/ports/1");
        fs::create_dir_all(port2.join("counters")).unwrap();
        fs::write(port2.join("counters/port_rcv_data"), "100\n").unwrap();
        fs::write(port2.join("counters/port_xmit_data"), "200\n").unwrap();
        let s = NodeSources::discover(Path::new("/nonexistent"), d.path());
        assert_eq!(s.ib.len(), 2);
        assert!(s.ib[0].0.ends_with("counters_ext/port_rcv_data_64"));
        assert!(s.ib[1].0.ends_with("counters/port_rcv_data"));
        let mut buf = Vec::new();
        let a = s.read(&mut buf);
        assert_eq!(a.ib[0], Some((40000000000, 80000000000)));
        assert_eq!(a.ib[1], Some((400, 800)));
        fs::write(port.join("counters_ext/port_rcv_data_64"), "10000262144\n").unwrap();
        let b = s.read(&mut buf);
        let r = s.rates(&a, &b, 2.0);
        assert!((r.ib_rx_mbps.unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(r.ib_tx_mbps, Some(0.0));
        assert_eq!(r.energy_j, None, "no RAPL, no field");
    }
}
