//! The flag thresholds: names, defaults, and overrides from `--set` and
//! `--config`.

use hpc_core::paths::escaped;
use hpc_core::{Error, Result};

/// Declares [`Param`], one variant a threshold, with its name, default and
/// meaning, in one list.
macro_rules! params {
    ($($key:ident: $name:literal = $default:literal, $doc:literal;)*) => {
        /// A threshold, by a typed key: `--set` and `--config` names map to
        /// one of these, and the rules read them through [`Thresholds::get`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Param {
            $(#[doc = $doc] $key,)*
        }

        impl Param {
            /// Every threshold, in `--list-thresholds` order.
            pub const ALL: &'static [Param] = &[$(Param::$key,)*];

            /// The name used by `--set`, `--config` and the man page.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Param::$key => $name,)*
                }
            }

            /// The default value.
            pub const fn default_value(self) -> f64 {
                match self {
                    $(Param::$key => $default,)*
                }
            }

            /// One line on what the threshold means.
            pub const fn doc(self) -> &'static str {
                match self {
                    $(Param::$key => $doc,)*
                }
            }
        }
    };
}

// A flag's main threshold has the flag's name; its other parameters are
// `<flag>_<what>`. The order is the flags' order (see `rules::RULES`).
params! {
    MemOverrequest: "mem_overrequest" = 0.25, "peak RSS / requested memory below this";
    IdleCpu: "idle_cpu" = 0.5, "share of the sampled time that is idle, above this";
    IdleCpuFrac: "idle_cpu_frac" = 0.05, "a sample is idle below this CPU fraction";
    SingleThreaded: "single_threaded" = 1.5, "effective cores (CPU time / elapsed) below this";
    SingleThreadedMinCpus: "single_threaded_min_cpus" = 2.0, "only for jobs with more CPUs than this";
    MemSpikePlateau: "mem_spike_plateau" = 0.6, "RSS after the peak window stays below this share of the peak";
    MemSpikePlateauWindow: "mem_spike_plateau_window" = 0.1, "the peak falls in this first share of the runtime";
    IoDominant: "io_dominant" = 0.5, "share of the sampled time that is I/O-bound, above this";
    IoDominantMbps: "io_dominant_mbps" = 10.0, "disk read+write MB/s above this is high I/O";
    IoDominantCpuFrac: "io_dominant_cpu_frac" = 0.1, "... while the CPU fraction is below this";
    LustreMetadataHeavy: "lustre_metadata_heavy" = 100.0, "mean Lustre metadata operations per second above this";
    LustreIoDominant: "lustre_io_dominant" = 0.5, "share of the sampled time that is Lustre-bound, above this";
    LustreIoDominantMbps: "lustre_io_dominant_mbps" = 50.0, "Lustre read+write MB/s above this is high I/O";
    LustreIoDominantCpuFrac: "lustre_io_dominant_cpu_frac" = 0.1, "... while the CPU fraction is below this";
    HighCpi: "high_cpi" = 1.0, "mean cycles per instruction above this";
    CacheThrashing: "cache_thrashing" = 0.5, "mean cache misses per cache reference above this";
    NumaMisplaced: "numa_misplaced" = 0.2, "mean NUMA miss rate above this";
    Catastrophe: "catastrophe" = 0.2, "later segment mean / earlier segment mean below this";
    CatastropheMinS: "catastrophe_min_s" = 60.0, "the later segment lasts at least this many seconds ...";
    CatastropheMinShare: "catastrophe_min_share" = 0.1, "... and at least this share of the runtime";
    CatastropheStartShare: "catastrophe_start_share" = 0.1, "the drop comes after this first share of the runtime";
    CatastropheGain: "catastrophe_gain" = 25.0, "the two-segment fit beats one segment by this many noise variances";
    NodeImbalance: "node_imbalance" = 1.0, "coefficient of variation of per-node mean busy cores above this";
    IdleNodes: "idle_nodes" = 0.5, "total CPU time below this share of one node's capacity over the run";
    GpuIdle: "gpu_idle" = 0.5, "share of the sampled time the GPUs are idle, above this";
    GpuIdleUtil: "gpu_idle_util" = 5.0, "the GPUs are idle below this mean utilisation (percent)";
    GpuUnused: "gpu_unused" = 1.0, "a GPU whose peak utilisation (percent) stays below this, with no process of the job, is unused";
    GpuMemLow: "gpu_mem_low" = 0.25, "peak GPU memory / the GPU's memory below this";
    GpuMemLowCardMb: "gpu_mem_low_card_mb" = 0.0, "the GPUs' memory in MiB for jobs known from sacct alone (0: unknown)";
}

/// The thresholds in force, one value per [`Param`].
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    values: [f64; Param::ALL.len()],
}

impl Default for Thresholds {
    fn default() -> Self {
        let mut values = [0.0; Param::ALL.len()];
        for p in Param::ALL {
            values[*p as usize] = p.default_value();
        }
        Thresholds { values }
    }
}

impl Thresholds {
    /// The value of threshold `p`.
    pub fn get(&self, p: Param) -> f64 {
        // `Param::ALL` lists every variant in declaration order, so the
        // discriminant is always an index of `values`.
        self.values[p as usize]
    }

    /// The threshold called `name`, if there is one.
    pub fn param(name: &str) -> Option<Param> {
        Param::ALL.iter().copied().find(|p| p.name() == name)
    }

    /// Sets `name` to the text `value`; unknown names and bad values are
    /// usage errors.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let name = name.trim();
        let key = Self::param(name).ok_or_else(|| {
            Error::Usage(format!(
                "unknown threshold '{}' (see hpc-flags(1))",
                escaped(name)
            ))
        })?;
        let v: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "threshold {name}: '{}' is not a number >= 0",
                    escaped(value.trim())
                ))
            })?;
        self.values[key as usize] = v;
        Ok(())
    }

    /// Applies one `name=value` assignment (`--set`).
    pub fn set_pair(&mut self, pair: &str) -> Result<()> {
        self.assign(pair)
            .map_err(|e| Error::Usage(format!("--set {}: {e}", escaped(pair))))
    }

    fn assign(&mut self, pair: &str) -> Result<()> {
        let (n, v) = pair.split_once('=').ok_or_else(|| {
            Error::Usage(format!("'{}': expected name=value", escaped(pair.trim())))
        })?;
        self.set(n, v)
    }

    /// Applies a config file's bytes: `name = value` lines, `#` starts a
    /// comment. Any bad line is a usage error that names `source` and the
    /// line, as a bad `--set` is.
    pub fn apply_config(&mut self, source: &str, bytes: &[u8]) -> Result<()> {
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let at =
                |e: &dyn std::fmt::Display| Error::Usage(format!("{source}: line {}: {e}", i + 1));
            let line = std::str::from_utf8(line).map_err(|_| at(&"not valid UTF-8"))?;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            self.assign(line).map_err(|e| at(&e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_param_has_its_own_name_and_slot() {
        for (i, p) in Param::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i, "{p:?}");
            assert_eq!(Thresholds::param(p.name()), Some(*p));
            assert_eq!(Thresholds::default().get(*p), p.default_value());
        }
        assert_eq!(Thresholds::param("high_cpi "), None);
    }

    #[test]
    fn overrides_and_errors() {
        let mut t = Thresholds::default();
        assert_eq!(t.get(Param::MemOverrequest), 0.25);
        t.set_pair("mem_overrequest=0.3").unwrap();
        assert_eq!(t.get(Param::MemOverrequest), 0.3);
        assert!(matches!(t.set_pair("nope=1"), Err(Error::Usage(_))));
        assert!(matches!(t.set_pair("high_cpi=x"), Err(Error::Usage(_))));
        assert!(matches!(t.set_pair("high_cpi"), Err(Error::Usage(_))));
        t.apply_config("c", b"# c\n\nhigh_cpi = 2 # more\n")
            .unwrap();
        assert_eq!(t.get(Param::HighCpi), 2.0);
        let e = t.apply_config("c", b"high_cpi = 2\nbad = 1\n").unwrap_err();
        assert!(e.to_string().contains("c: line 2"), "{e}");
        let e = t.apply_config("c", b"high_cpi = 2\nx\n").unwrap_err();
        assert_eq!(e.to_string(), "c: line 2: 'x': expected name=value");
        let e = t.apply_config("c", b"\n\nhigh_cpi = \xff\n").unwrap_err();
        assert!(
            matches!(&e, Error::Usage(m) if m == "c: line 3: not valid UTF-8"),
            "{e}"
        );
    }
}
