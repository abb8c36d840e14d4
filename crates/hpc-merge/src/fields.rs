//! The sample fields hpc-merge combines, and how: one list, the only one.
//! A leaf module: the binning ([`crate::bins`]), the serde reader
//! ([`crate::input`]) and the fast reader ([`crate::fast`]) all take their
//! fields from here. Each name is checked at compile time against the
//! sample table of hpc-core ([`hpc_core::record::Sample::FIELDS`]), and a
//! test checks that every field of that table is combined or named as not.

use std::borrow::Cow;

use hpc_core::fields::{index_of, Kind as FieldKind};
use hpc_core::record::Sample;
use serde::Deserialize;

/// How a field combines inside one node's bin and across nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A level (memory): largest value in a bin, summed over nodes.
    Level,
    /// A rate (busy cores, MB/s, W): mean in a bin, summed over nodes.
    Rate,
    /// A cumulative counter: latest value in a bin; node increments summed.
    Cumulative,
    /// A ratio (CPI, miss rates): mean in a bin, averaged over nodes.
    Ratio,
}

/// A sample field that hpc-merge combines.
pub(crate) struct Field {
    pub name: &'static str,
    pub kind: Kind,
}

/// A field of hpc-core's sample table, checked at compile time: the name
/// must be there, as a number.
const fn field(name: &'static str, kind: Kind) -> Field {
    let f = Sample::FIELDS[index_of(Sample::FIELDS, name)];
    assert!(
        matches!(f.kind, FieldKind::Real),
        "a combined field is a number"
    );
    Field { name, kind }
}

macro_rules! fields {
    ($($name:ident: $kind:ident),* $(,)?) => {
        /// The combined fields, grouped by kind (the output's order).
        pub(crate) const FIELDS: &[Field] = &[$(field(stringify!($name), Kind::$kind)),*];

        /// The fields of a line that hpc-merge reads: the kind, and for
        /// samples the time, host, job and the combined values. Strings are
        /// borrowed from the line when they hold no escapes; unknown keys
        /// are skipped.
        #[derive(Deserialize)]
        pub(crate) struct RawSample<'a> {
            #[serde(borrow, default)]
            pub kind: Option<Cow<'a, str>>,
            #[serde(default)]
            pub t: Option<f64>,
            #[serde(borrow, default)]
            pub host: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            pub job_id: Option<Cow<'a, str>>,
            $(
                #[serde(default)]
                pub $name: Option<f64>,
            )*
        }

        /// The values of one parsed sample, in [`FIELDS`] order (NaN = absent).
        pub(crate) fn values_of(s: &RawSample) -> [f64; NF] {
            [$(s.$name.unwrap_or(f64::NAN)),*]
        }
    };
}

fields! {
    rss_mb: Level,
    hwm_mb: Level,
    swap_mb: Level,
    pss_mb: Level,
    gpu_mem_mb: Level,
    gpu_mem_total_mb: Level,
    page_cache_mb: Level,
    cpu_cores: Rate,
    read_mbps: Rate,
    write_mbps: Rate,
    lustre_read_mbps: Rate,
    lustre_write_mbps: Rate,
    lustre_meta_ops: Rate,
    power_w: Rate,
    ib_rx_mbps: Rate,
    ib_tx_mbps: Rate,
    gpu_power_w: Rate,
    read_mb: Cumulative,
    write_mb: Cumulative,
    cpu_user_s: Cumulative,
    cpu_sys_s: Cumulative,
    energy_j: Cumulative,
    numa_miss_rate: Ratio,
    cpi: Ratio,
    cache_miss_rate: Ratio,
    gpu_util: Ratio,
}

/// The number of combined fields.
pub(crate) const NF: usize = FIELDS.len();

/// Index of a combined field by name (an unknown name stops the build).
pub(crate) const fn idx(name: &str) -> usize {
    let mut i = 0;
    while i < FIELDS.len() {
        if hpc_core::fields::const_eq(FIELDS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("unknown field")
}

pub(crate) const RSS: usize = idx("rss_mb");
pub(crate) const HWM: usize = idx("hwm_mb");
pub(crate) const CORES: usize = idx("cpu_cores");
pub(crate) const READ_MBPS: usize = idx("read_mbps");
pub(crate) const WRITE_MBPS: usize = idx("write_mbps");
pub(crate) const LREAD: usize = idx("lustre_read_mbps");
pub(crate) const LWRITE: usize = idx("lustre_write_mbps");
pub(crate) const LMETA: usize = idx("lustre_meta_ops");
pub(crate) const POWER: usize = idx("power_w");
pub(crate) const READ_MB: usize = idx("read_mb");
pub(crate) const WRITE_MB: usize = idx("write_mb");
pub(crate) const CPU_USER: usize = idx("cpu_user_s");
pub(crate) const CPU_SYS: usize = idx("cpu_sys_s");
pub(crate) const ENERGY: usize = idx("energy_j");
pub(crate) const NUMA: usize = idx("numa_miss_rate");
pub(crate) const CPI: usize = idx("cpi");
pub(crate) const CACHE: usize = idx("cache_miss_rate");

/// The fields of each kind lie together, in this order (checked below), so
/// that the per-sample and per-bin loops run over ranges of one kind.
pub(crate) const LEVELS: std::ops::Range<usize> = 0..7;
pub(crate) const RATES: std::ops::Range<usize> = 7..17;
pub(crate) const CUMULATIVE: std::ops::Range<usize> = 17..22;
pub(crate) const RATIOS: std::ops::Range<usize> = 22..NF;

const _: () = {
    let mut k = 0;
    while k < NF {
        let ok = match FIELDS[k].kind {
            Kind::Level => k < LEVELS.end,
            Kind::Rate => k >= RATES.start && k < RATES.end,
            Kind::Cumulative => k >= CUMULATIVE.start && k < CUMULATIVE.end,
            Kind::Ratio => k >= RATIOS.start && k < RATIOS.end,
        };
        assert!(ok, "FIELDS are not grouped by kind as the ranges say");
        k += 1;
    }
    assert!(LEVELS.start == 0 && LEVELS.end == RATES.start);
    assert!(RATES.end == CUMULATIVE.start && CUMULATIVE.end == RATIOS.start);
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample fields hpc-merge does not combine: the keys, and what it
    /// derives again (`cpu_frac`) or has no sum for.
    const NOT_COMBINED: &[&str] = &["t", "host", "job_id", "cpu_frac", "threads", "procs"];

    #[test]
    fn field_table_matches_its_length() {
        assert_eq!(FIELDS.len(), NF);
        assert_eq!(FIELDS[RSS].name, "rss_mb");
        assert_eq!(FIELDS[CACHE].name, "cache_miss_rate");
    }

    #[test]
    fn every_sample_field_is_combined_or_named_as_not() {
        for f in Sample::FIELDS {
            let combined = FIELDS.iter().filter(|c| c.name == f.name).count();
            let not = NOT_COMBINED.contains(&f.name);
            assert!(
                (combined == 1) != not,
                "{}: combined {combined} times, in NOT_COMBINED: {not}",
                f.name
            );
        }
        assert_eq!(FIELDS.len() + NOT_COMBINED.len(), Sample::FIELDS.len());
    }
}
