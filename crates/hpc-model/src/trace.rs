//! Traces to replay: any CSV with a column mapping (`--csv`), the MGnify
//! preset (`--mgnify HEURISTICS.tsv`), or a history of job records.

use std::collections::HashMap;
use std::io::Read;

use hpc_core::ndjson::Rejects;
use hpc_core::{Error, Result};

use crate::history::Past;

/// What a replay sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Resource {
    /// Memory, MiB; jobs weighted by their runtime.
    #[default]
    Mem,
    /// Time, seconds; every job weighs 1.
    Time,
}

impl Resource {
    /// The name on the command line and in the records.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Mem => "mem",
            Resource::Time => "time",
        }
    }

    /// Parses `mem` or `time`.
    pub fn parse(s: &str) -> Option<Resource> {
        match s {
            "mem" => Some(Resource::Mem),
            "time" => Some(Resource::Time),
            _ => None,
        }
    }
}

/// One job of a trace: memory in MiB or time in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceJob {
    /// The group it is sized with (a tool, a user, a biome).
    pub group: String,
    /// What it used: peak memory (MiB) or runtime (s).
    pub used: f64,
    /// What its first attempt requested, same unit.
    pub request: Option<f64>,
    /// Its weight in the wastage: runtime in seconds for memory (1 when
    /// the trace has none), 1 for time.
    pub weight: f64,
    /// Input size (any unit), for the model tier.
    pub input: Option<f64>,
    /// The sort key: the number its digits form, then the text.
    pub order: (f64, String),
}

/// How the columns of a CSV trace map to a job.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    /// Columns whose values, joined by `|`, form the group.
    pub group: Vec<String>,
    /// What is sized.
    pub resource: Resource,
    /// The column of what was used (peak memory, or runtime for time).
    pub used: String,
    /// The column of what was requested (absent: no request known).
    pub request: Option<String>,
    /// Runtime column, the weight of a memory job (absent: 1 each).
    pub runtime: Option<String>,
    /// Order column (time or a growing id).
    pub order: String,
    /// Input size column.
    pub input: Option<String>,
    /// MiB per unit of `used` and `request` (b, kb, mb, gb).
    pub mem_scale: f64,
    /// Seconds per unit of `runtime` (s, ms).
    pub time_scale: f64,
    /// The MGnify heuristics table: request by longest lineage prefix.
    pub heuristics: Option<Heuristics>,
}

/// MiB per unit of a `--mem-unit` name.
pub fn mem_scale(unit: &str) -> Option<f64> {
    Some(match unit {
        "b" => 1.0 / (1024.0 * 1024.0),
        "kb" => 1.0 / 1024.0,
        "mb" => 1.0,
        "gb" => 1024.0,
        _ => return None,
    })
}

/// Seconds per unit of a `--runtime-unit` name.
pub fn time_scale(unit: &str) -> Option<f64> {
    Some(match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        _ => return None,
    })
}

/// The order key of a cell: the number it is, the Unix seconds of a UTC
/// timestamp (`2025-04-30T09:00:00.5`, `...Z`; its digits alone order
/// `09:00:00.5` after `10:00:00`), or the number its digits form
/// (`ERZ7462993` orders as 7462993), with the text to break ties.
pub fn order_key(cell: &str) -> (f64, String) {
    let text = cell.trim();
    let num = text
        .parse::<f64>()
        .ok()
        .or_else(|| timestamp_secs(text))
        .or_else(|| {
            let digits: String = cell.chars().filter(char::is_ascii_digit).collect();
            digits.parse::<f64>().ok()
        });
    (num.unwrap_or(f64::INFINITY), cell.to_owned())
}

/// `YYYY-MM-DDTHH:MM:SS` (or a space for the T), then an optional fraction
/// and `Z`, as Unix seconds.
fn timestamp_secs(text: &str) -> Option<f64> {
    let (whole, rest) = (text.get(..19)?, text.get(19..)?);
    let rest = rest.strip_suffix('Z').unwrap_or(rest);
    let frac = match rest.strip_prefix('.') {
        Some(d) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
            format!("0.{d}").parse::<f64>().ok()?
        }
        None if rest.is_empty() => 0.0,
        _ => return None,
    };
    let t = hpc_core::slurm::parse_timestamp(&whole.replacen(' ', "T", 1), 0).ok()??;
    Some(t.epoch as f64 + frac)
}

/// The MGnify production table: memory (GB) per assembler and biome
/// lineage (`root.environmental.aquatic.marine`).
#[derive(Debug, Clone, Default)]
pub struct Heuristics {
    by: HashMap<(String, String), f64>,
}

/// A lineage as the heuristics table spells it: lower case, `.` between
/// levels (`:` in the trace), `_` for anything else not alphanumeric
/// (`Host-associated` is `host_associated`).
fn lineage_key(lineage: &str) -> String {
    lineage
        .trim()
        .chars()
        .map(|c| match c {
            ':' | '.' => '.',
            c if c.is_alphanumeric() => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect()
}

impl Heuristics {
    /// Reads the TSV (columns `memory_gb`, `assembler_name`, `biome_lineage`).
    pub fn read(text: &str) -> Result<Heuristics> {
        let mut r = csv::ReaderBuilder::new()
            .delimiter(b'\t')
            .from_reader(text.as_bytes());
        let head = r.headers()?.clone();
        let col = |name: &str| {
            head.iter()
                .position(|h| h == name)
                .ok_or_else(|| Error::Other(format!("heuristics: no column {name}")))
        };
        let (mem, asm, lin) = (
            col("memory_gb")?,
            col("assembler_name")?,
            col("biome_lineage")?,
        );
        let mut by = HashMap::new();
        for (i, rec) in r.records().enumerate() {
            let rec = rec?;
            let gb: f64 = rec[mem].trim().parse().map_err(|_| {
                Error::Other(format!(
                    "heuristics: line {}: memory_gb not a number",
                    i + 2
                ))
            })?;
            by.insert((rec[asm].to_lowercase(), lineage_key(&rec[lin])), gb);
        }
        Ok(Heuristics { by })
    }

    /// The request (GB) for a lineage (`root:Environmental:Aquatic:Marine`)
    /// and assembler: the row of the longest matching lineage prefix.
    pub fn request_gb(&self, assembler: &str, lineage: &str) -> Option<f64> {
        let key = lineage_key(lineage);
        let asm = assembler.to_lowercase();
        let mut cut = key.as_str();
        loop {
            if let Some(gb) = self.by.get(&(asm.clone(), cut.to_owned())) {
                return Some(*gb);
            }
            cut = &cut[..cut.rfind('.')?];
        }
    }
}

impl Mapping {
    /// The MGnify preset over `heuristics`.
    pub fn mgnify(heuristics: Heuristics) -> Mapping {
        Mapping {
            group: vec!["lineage".into()],
            resource: Resource::Mem,
            used: "peak_mem_in_gbs".into(),
            request: None,
            runtime: Some("wall_clock_seconds".into()),
            order: "primary_accession".into(),
            input: None,
            mem_scale: 1024.0,
            time_scale: 1.0,
            heuristics: Some(heuristics),
        }
    }
}

/// What reading a trace found.
#[derive(Debug, Default)]
pub struct Trace {
    /// The usable jobs, in order.
    pub jobs: Vec<TraceJob>,
    /// Rows read.
    pub rows: u64,
    /// Rows without a positive peak or runtime (not jobs that can be sized).
    pub skipped: u64,
    /// Jobs whose first attempt failed and were retried (Nextflow's
    /// `attempt` > 1).
    pub retried: u64,
}

/// The largest figure a trace's cell is believed for, whatever its unit
/// (bytes of a petabyte job fit): beyond it, sums over a trace overflow.
const MOST_FIGURE: f64 = 1e18;

/// Reads a CSV trace with `map`; bad cells are rejected with their line.
pub fn read_csv(
    input: impl Read,
    map: &Mapping,
    source: &str,
    rejects: &mut Rejects,
) -> Result<Trace> {
    // Records end at '\n' only, a '\r' before it trimmed with the cell:
    // with the default CRLF terminator the reader counted a CRLF file's
    // lines one short (a bad cell on line 3 was named line 2).
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_reader(input);
    let head = r.headers()?.clone();
    let col = |name: &str| {
        head.iter().position(|h| h.trim() == name).ok_or_else(|| {
            Error::Usage(format!(
                "{}: no column {name}",
                hpc_core::paths::escaped(source)
            ))
        })
    };
    let groups: Vec<usize> = map.group.iter().map(|g| col(g)).collect::<Result<_>>()?;
    let (used, order) = (col(&map.used)?, col(&map.order)?);
    let runtime = map.runtime.as_deref().map(col).transpose()?;
    let request = map.request.as_deref().map(col).transpose()?;
    let input = map.input.as_deref().map(col).transpose()?;
    let assembler = map
        .heuristics
        .as_ref()
        .map(|_| col("assembler"))
        .transpose()?;
    let mut trace = Trace::default();
    let mut raw = csv::ByteRecord::new();
    // Rows are read as bytes: a row that is not UTF-8, or whose fields do
    // not match the header (an unclosed quote runs on to the end of the
    // file), is rejected with its line and the others are replayed.
    while r.read_byte_record(&mut raw)? {
        trace.rows += 1;
        let line = raw.position().map_or(trace.rows + 1, |p| p.line());
        let rec = match csv::StringRecord::from_byte_record(raw.clone()) {
            // A field over several lines is most likely an unclosed quote
            // (in the last column, it keeps the header's field count).
            Ok(rec) if rec.iter().any(|f| f.contains('\n')) => {
                let why = "a field runs over several lines (an unclosed quote?)";
                rejects.reject(Some(source), line, why)?;
                continue;
            }
            Ok(rec) if rec.len() == head.len() => rec,
            Ok(rec) => {
                let why = format!("{} fields where the header has {}", rec.len(), head.len());
                rejects.reject(Some(source), line, &why)?;
                continue;
            }
            Err(_) => {
                rejects.reject(Some(source), line, "not UTF-8")?;
                continue;
            }
        };
        let cell = |i: usize| rec.get(i).unwrap_or("").trim();
        // A figure is a finite number (Rust reads "NaN" and "inf" as
        // numbers) within what a job record is believed for.
        let num = |i: usize, what: &str| -> std::result::Result<Option<f64>, String> {
            match cell(i) {
                "" => Ok(None),
                s => match s.parse::<f64>() {
                    Ok(v) if v.is_finite() && v.abs() <= MOST_FIGURE => Ok(Some(v)),
                    _ => Err(format!(
                        "{what} '{}' is not a finite number of at most {MOST_FIGURE:e}",
                        hpc_core::paths::escaped(s)
                    )),
                },
            }
        };
        let group = groups
            .iter()
            .map(|&i| cell(i))
            .collect::<Vec<_>>()
            .join("|");
        let parsed = (|| {
            let u = num(used, "used")?;
            let t = match runtime {
                Some(i) => num(i, "runtime")?,
                None => Some(1.0),
            };
            let q = match (&map.heuristics, assembler) {
                (Some(h), Some(a)) => h.request_gb(cell(a), &group),
                _ => request.map(|i| num(i, "request")).transpose()?.flatten(),
            };
            let x = input.map(|i| num(i, "input")).transpose()?.flatten();
            Ok::<_, String>((u, t, q, x))
        })();
        match parsed {
            Err(why) => rejects.reject(Some(source), line, &why)?,
            Ok((Some(u), Some(t), q, x))
                if u > 0.0 && t > 0.0 && u.is_finite() && t.is_finite() =>
            {
                let (scale, weight) = match map.resource {
                    Resource::Mem => (map.mem_scale, t * map.time_scale),
                    Resource::Time => (map.time_scale, 1.0),
                };
                trace.jobs.push(TraceJob {
                    group,
                    used: u * scale,
                    request: q.filter(|v| *v > 0.0 && v.is_finite()).map(|v| v * scale),
                    weight,
                    input: x,
                    order: order_key(cell(order)),
                })
            }
            Ok(_) => trace.skipped += 1,
        }
    }
    sort(&mut trace.jobs);
    Ok(trace)
}

/// Sorts jobs by their order key.
pub fn sort(jobs: &mut [TraceJob]) {
    jobs.sort_by(|a, b| {
        a.order
            .0
            .total_cmp(&b.order.0)
            .then_with(|| a.order.1.cmp(&b.order.1))
    });
}

/// A history of job records as a trace: completed jobs with a peak and an
/// elapsed time, grouped by user and tool (the job name when no analysis
/// names the tool), in end-time order.
pub fn from_history(jobs: &[Past], resource: Resource) -> Trace {
    let mut trace = Trace::default();
    for p in jobs {
        trace.rows += 1;
        let (used, request, weight) = match (resource, p.peak_mb, p.elapsed_s) {
            (Resource::Mem, Some(u), Some(t)) => (u, p.req_mem_mb, t),
            (Resource::Time, _, Some(t)) => (t, p.timelimit_s, 1.0),
            _ => (0.0, None, 0.0),
        };
        if p.state == "COMPLETED" && used > 0.0 && weight > 0.0 {
            trace.jobs.push(TraceJob {
                group: p.group(),
                used,
                request: request.filter(|v| *v > 0.0),
                weight,
                input: p.input_mb,
                order: (0.0, p.end.clone().unwrap_or_default()),
            });
        } else {
            trace.skipped += 1;
        }
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_order_by_time_whatever_their_digits() {
        // By digits alone 09:00:00.5 (…0900005) came after 10:00:00
        // (…100000).
        let k = |s: &str| order_key(s).0;
        assert!(k("2026-01-01T09:00:00.5") < k("2026-01-01T10:00:00"));
        assert_eq!(k("2026-01-01T10:00:00"), k("2026-01-01T10:00:00.0"));
        assert_eq!(k("2026-01-01 10:00:00Z"), k("2026-01-01T10:00:00"));
        assert_eq!(k("1970-01-01T00:01:00"), 60.0);
        assert_eq!(k("ERZ7462993"), 7_462_993.0);
        assert_eq!(k("12.5"), 12.5);
    }

    #[test]
    fn mgnify_requests_come_from_the_longest_lineage_prefix() {
        let tsv = "memory_gb\tprocess\tassembler_name\tbiome_name\tbiome_lineage\n\
                   9\tASSEM\tmetaspades\troot\troot\n\
                   217\tASSEM\tmetaspades\tMarine\troot.environmental.aquatic.marine\n\
                   200\tASSEM\tflye\tEnvironmental\troot.environmental\n";
        let h = Heuristics::read(tsv).unwrap();
        assert_eq!(
            h.request_gb("metaspades", "root:Environmental:Aquatic:Marine:Oceanic"),
            Some(217.0)
        );
        assert_eq!(
            h.request_gb("metaspades", "root:Environmental:Terrestrial"),
            Some(9.0)
        );
        assert_eq!(h.request_gb("megahit", "root:Host-associated"), None);
        let tsv2 = "memory_gb\tassembler_name\tbiome_lineage\n43\tmetaspades\troot.host_associated.human.skin\n";
        let h2 = Heuristics::read(tsv2).unwrap();
        assert_eq!(
            h2.request_gb("metaspades", "root:Host-associated:Human:Skin"),
            Some(43.0)
        );
    }

    #[test]
    fn csv_rows_map_units_order_and_rejects() {
        let csv = "id,g,used,req,t\nJ10,a,2,4,60\nJ9,a,1.5,4,30\nJ11,a,x,4,1\nJ12,b,0,4,5\n";
        let map = Mapping {
            group: vec!["g".into()],
            used: "used".into(),
            request: Some("req".into()),
            runtime: Some("t".into()),
            order: "id".into(),
            mem_scale: mem_scale("gb").unwrap(),
            time_scale: 1.0,
            ..Default::default()
        };
        let mut rej = Rejects::new("t");
        let t = read_csv(csv.as_bytes(), &map, "f.csv", &mut rej).unwrap();
        assert_eq!(rej.rejected, 1);
        assert_eq!((t.rows, t.skipped, t.jobs.len()), (4, 1, 2));
        assert_eq!(t.jobs[0].used, 1536.0, "J9 before J10");
        assert_eq!(t.jobs[1].request, Some(4096.0));
    }
}
