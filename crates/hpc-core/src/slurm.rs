//! Parsing of the values SLURM prints: memory sizes, durations, timestamps,
//! job ids, job states and TRES lists.
//!
//! Every parser takes the text of one field and returns a typed value or a
//! short reason, so callers can report `line N: Field 'x': reason`.

/// The sacct fields hpc-ingest asks for (`hpc-ingest --sacct-format`
/// prints them), in order; hpc-testkit's generator writes the same.
pub const SACCT_FIELDS: &[&str] = &[
    "Cluster",
    "JobID",
    "JobIDRaw",
    "User",
    "Group",
    "Account",
    "Partition",
    "JobName",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "Timelimit",
    "AllocCPUS",
    "AllocTRES",
    "NNodes",
    "NTasks",
    "NodeList",
    "ReqMem",
    "MaxRSS",
    "TotalCPU",
    "TRESUsageInMax",
    "TRESUsageInAve",
];

/// How a memory request scales, from the old `n`/`c` suffixes of `ReqMem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemScope {
    /// A plain value: the whole job (or step) amount.
    Total,
    /// `Mn`: per node; multiply by the node count.
    PerNode,
    /// `Mc`: per CPU; multiply by the allocated CPU count.
    PerCpu,
}

/// A parsed memory value in MiB with its scope.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mem {
    /// The value in MiB (SLURM's `M`).
    pub mb: f64,
    /// Whether it is per node, per CPU or a total.
    pub scope: MemScope,
}

impl Mem {
    /// The total in MiB for a job with `nodes` nodes and `cpus` CPUs.
    pub fn total_mb(&self, nodes: u32, cpus: u32) -> f64 {
        match self.scope {
            MemScope::Total => self.mb,
            MemScope::PerNode => self.mb * f64::from(nodes.max(1)),
            MemScope::PerCpu => self.mb * f64::from(cpus.max(1)),
        }
    }
}

/// Parses a SLURM memory size such as `312.50G`, `4000Mc`, `1Gn`, `322212K`.
///
/// `bare_unit` is the unit of a number with no suffix, as a multiplier of
/// bytes: `ReqMem` counts in MiB, `MaxRSS` in bytes. Empty text is `None`.
pub fn parse_mem(s: &str, bare_unit: f64) -> Result<Option<Mem>, String> {
    let s = s.trim_ascii();
    if s.is_empty() {
        return Ok(None);
    }
    let bytes = s.as_bytes();
    let mut end = bytes.len();
    let mut scope = MemScope::Total;
    match bytes[end - 1] {
        b'n' => {
            scope = MemScope::PerNode;
            end -= 1;
        }
        b'c' => {
            scope = MemScope::PerCpu;
            end -= 1;
        }
        _ => {}
    }
    if end == 0 {
        return Err(format!("'{s}': not a memory size"));
    }
    let mult = match bytes[end - 1] {
        b'K' | b'k' => Some(1024.0),
        b'M' | b'm' => Some(1024.0 * 1024.0),
        b'G' | b'g' => Some(1024.0 * 1024.0 * 1024.0),
        b'T' | b't' => Some(1024.0 * 1024.0 * 1024.0 * 1024.0),
        b'P' | b'p' => Some(1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        b'0'..=b'9' | b'.' => None,
        _ => return Err(format!("'{s}': unknown memory unit")),
    };
    let num_end = if mult.is_some() { end - 1 } else { end };
    let num = &s[..num_end];
    let v = parse_decimal(num).ok_or_else(|| format!("'{s}': not a memory size"))?;
    let bytes = v * mult.unwrap_or(bare_unit);
    Ok(Some(Mem {
        mb: bytes / (1024.0 * 1024.0),
        scope,
    }))
}

/// Parses a non-negative decimal number quickly (digits with at most one dot).
fn parse_decimal(s: &str) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let mut int: u64 = 0;
    let mut frac: u64 = 0;
    let mut frac_div: f64 = 1.0;
    let mut seen_dot = false;
    let mut digits = 0;
    for &b in s.as_bytes() {
        match b {
            b'0'..=b'9' => {
                digits += 1;
                if seen_dot {
                    if frac_div < 1e15 {
                        frac = frac * 10 + u64::from(b - b'0');
                        frac_div *= 10.0;
                    }
                } else {
                    int = int.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return None,
        }
    }
    if digits == 0 {
        return None;
    }
    Some(int as f64 + frac as f64 / frac_div)
}

/// A duration or time limit as SLURM prints it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// A finite number of seconds.
    Seconds(f64),
    /// `UNLIMITED` (or `INFINITE`).
    Unlimited,
    /// `Partition_Limit`: the partition's limit applies.
    PartitionLimit,
}

/// Parses `MM:SS.mmm`, `HH:MM:SS`, `D-HH:MM:SS` (any number of days),
/// `D-HH`, `D-HH:MM`, `UNLIMITED`, `Partition_Limit`. Empty and `INVALID`
/// give `None`.
pub fn parse_limit(s: &str) -> Result<Option<Limit>, String> {
    let s = s.trim_ascii();
    match s {
        "" | "INVALID" | "None" => return Ok(None),
        "UNLIMITED" | "INFINITE" | "infinite" => return Ok(Some(Limit::Unlimited)),
        "Partition_Limit" => return Ok(Some(Limit::PartitionLimit)),
        _ => {}
    }
    parse_duration_secs(s)
        .map(|v| Some(Limit::Seconds(v)))
        .ok_or_else(|| format!("'{s}': not a duration"))
}

/// Parses a duration to seconds; `None` for empty and `INVALID`. Unlimited
/// values are an error here: use [`parse_limit`] for time limits.
pub fn parse_duration(s: &str) -> Result<Option<f64>, String> {
    match parse_limit(s)? {
        None => Ok(None),
        Some(Limit::Seconds(v)) => Ok(Some(v)),
        Some(_) => Err(format!("'{}': not a finite duration", s.trim_ascii())),
    }
}

fn parse_duration_secs(s: &str) -> Option<f64> {
    let (days, rest, has_days) = match s.find('-') {
        Some(i) => (parse_uint(&s[..i])?, &s[i + 1..], true),
        None => (0, s, false),
    };
    let mut fields = [""; 3];
    let mut n = 0;
    for p in rest.split(':') {
        if n == 3 {
            return None;
        }
        fields[n] = p;
        n += 1;
    }
    // Only the last field may carry a fraction (`MM:SS.mmm`).
    let mut parts = [0.0f64; 3];
    for i in 0..n {
        parts[i] = if i + 1 == n {
            parse_decimal(fields[i])?
        } else {
            parse_uint(fields[i])? as f64
        };
    }
    let (h, m, sec) = match (n, has_days) {
        (3, _) => (parts[0], parts[1], parts[2]),
        (2, false) => (0.0, parts[0], parts[1]),
        (2, true) => (parts[0], parts[1], 0.0),
        (1, true) => (parts[0], 0.0, 0.0),
        (1, false) => (0.0, parts[0], 0.0), // bare minutes, as sbatch reads them
        _ => return None,
    };
    Some(days as f64 * 86400.0 + h * 3600.0 + m * 60.0 + sec)
}

fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 18 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s.as_bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
    }
    Some(v)
}

/// Parses an unsigned integer field; empty gives `None`.
pub fn parse_count(s: &str) -> Result<Option<u64>, String> {
    let s = s.trim_ascii();
    if s.is_empty() {
        return Ok(None);
    }
    parse_uint(s)
        .map(Some)
        .ok_or_else(|| format!("'{s}': not a count"))
}

/// A point in time, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    /// Seconds since the Unix epoch (UTC).
    pub epoch: i64,
}

impl Timestamp {
    /// RFC 3339 text in UTC (`2026-11-21T23:28:56Z`).
    pub fn to_rfc3339(&self) -> String {
        let (y, mo, d, h, mi, s) = civil_from_epoch(self.epoch);
        if !(0..=9999).contains(&y) {
            return format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z");
        }
        // Hot in the ingest path: write the digits directly.
        let mut b = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, v: u32, width: usize| {
            let mut v = v;
            for i in (0..width).rev() {
                b[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, y as u32, 4);
        put(5, mo, 2);
        put(8, d, 2);
        put(11, h, 2);
        put(14, mi, 2);
        put(17, s, 2);
        String::from_utf8_lossy(&b).into_owned()
    }

    /// Parses RFC 3339 text as written by [`Timestamp::to_rfc3339`] (any offset).
    pub fn from_rfc3339(s: &str) -> Option<Timestamp> {
        let t: jiff::Timestamp = s.trim_ascii().parse().ok()?;
        Some(Timestamp {
            epoch: t.as_second(),
        })
    }
}

/// A civil date and time as SLURM prints it (`2026-11-21T23:28:56`), checked.
#[derive(Debug, Clone, Copy)]
struct Civil {
    y: i16,
    mo: i8,
    d: i8,
    h: i8,
    mi: i8,
    s: i8,
}

impl Civil {
    /// Reads the first 19 bytes of `s` (`YYYY-MM-DDTHH:MM:SS`).
    fn parse(s: &str) -> Option<Civil> {
        let b = s.as_bytes();
        if b.len() < 19
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let num = |r: std::ops::Range<usize>| s.get(r).and_then(parse_uint);
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        // A leap second (`:60`) is read as the next second, as POSIX time has it.
        if !(1..=12).contains(&mo)
            || d == 0
            || d > days_in_month(y as i64, mo as u32)
            || h > 23
            || mi > 59
            || sec > 60
        {
            return None;
        }
        Some(Civil {
            y: y as i16,
            mo: mo as i8,
            d: d as i8,
            h: h as i8,
            mi: mi as i8,
            s: sec as i8,
        })
    }

    /// Seconds since 1970-01-01T00:00:00 of the same wall-clock reading.
    fn seconds(&self) -> i64 {
        days_from_civil(i64::from(self.y), self.mo as u32, self.d as u32) * 86400
            + i64::from(self.h) * 3600
            + i64::from(self.mi) * 60
            + i64::from(self.s)
    }
}

/// An offset suffix: `Z`, `+HH:MM`, `-HH:MM`, `+HHMM` or `+HH`, in seconds
/// east of UTC.
fn parse_offset(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let sign = match b.first()? {
        b'Z' | b'z' if b.len() == 1 => return Some(0),
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = match b.len() {
        3 => (&s[1..3], "0"),
        5 => (&s[1..3], &s[3..5]),
        6 if b[3] == b':' => (&s[1..3], &s[4..6]),
        _ => return None,
    };
    let (h, m) = (parse_uint(h)?, parse_uint(m)?);
    (h <= 25 && m <= 59).then(|| sign * (h * 3600 + m * 60) as i64)
}

/// The values that mean "no time" in SLURM's output.
fn is_no_time(s: &str) -> bool {
    matches!(s, "" | "Unknown" | "None" | "0" | "N/A")
}

/// Parses a SLURM timestamp at a fixed offset: `Unknown`, `None`, empty and
/// `0` give `None`. SLURM prints local time without an offset: `utc_offset_s`
/// is that offset (east of UTC, in seconds). For a zone with daylight saving
/// time, use [`Zone::parse`], which also reads offsets and Unix seconds.
pub fn parse_timestamp(s: &str, utc_offset_s: i64) -> Result<Option<Timestamp>, String> {
    let s = s.trim_ascii();
    if is_no_time(s) {
        return Ok(None);
    }
    match Civil::parse(s) {
        Some(c) if s.len() == 19 => Ok(Some(Timestamp {
            epoch: c.seconds() - utc_offset_s,
        })),
        _ => Err(format!("'{s}': not a timestamp")),
    }
}

/// The local time zone that SLURM's times without an offset are read in,
/// with the rules of the system's time zone database (`TZ`, else
/// `/etc/localtime`), so each date gets the offset in force at that instant.
///
/// A wall-clock time that occurs twice (the hour repeated when daylight
/// saving time ends) is read as the first of the two, the earlier instant;
/// one that does not occur (the hour skipped when it starts) is read with
/// the offset from before the gap, so `02:30` on that day is `03:30`
/// daylight time. This is jiff's "compatible" disambiguation, the rule of
/// RFC 5545 and of most tools. Unix seconds and times with an offset are
/// never ambiguous: `SLURM_TIME_FORMAT=%s` makes sacct print the former.
///
/// Parsing is fast for runs of nearby dates: the offset of the last window
/// between two transitions is kept, and only times outside it (or within
/// two days of its ends) go through the full rules.
#[derive(Debug, Clone)]
pub struct Zone {
    tz: jiff::tz::TimeZone,
    window: std::cell::Cell<Window>,
}

/// Wall-clock seconds `lo..hi` (as [`Civil::seconds`] counts them) all have
/// one offset and are not near a transition.
#[derive(Debug, Clone, Copy)]
struct Window {
    lo: i64,
    hi: i64,
    offset: i64,
}

/// How far from a transition the cached window stays: more than any
/// difference between two offsets of one zone (at most 26 hours).
const WINDOW_MARGIN_S: i64 = 2 * 86400;

impl Zone {
    fn with(tz: jiff::tz::TimeZone) -> Zone {
        Zone {
            tz,
            window: std::cell::Cell::new(Window {
                lo: 0,
                hi: 0,
                offset: 0,
            }),
        }
    }

    /// UTC.
    pub fn utc() -> Zone {
        Zone::with(jiff::tz::TimeZone::UTC)
    }

    /// A zone of the time zone database by name (`America/New_York`).
    pub fn named(name: &str) -> Result<Zone, String> {
        jiff::tz::TimeZone::get(name)
            .map(Zone::with)
            .map_err(|e| format!("time zone '{name}': {e} (is the tzdata package installed?)"))
    }

    /// The system's local zone: `TZ` (`Area/City`, `:Area/City`, a TZif file
    /// path or a POSIX rule; empty means UTC), else `/etc/localtime`, else
    /// UTC. A `TZ` that names no zone is an error, not a silent UTC.
    pub fn system() -> Result<Zone, String> {
        // jiff keeps the system zone for a while: read `TZ` as it is now.
        jiff::tz::reset_system_time_zone_cache();
        match jiff::tz::TimeZone::try_system() {
            Ok(tz) => Ok(Zone::with(tz)),
            Err(_) if std::env::var_os("TZ").filter(|v| !v.is_empty()).is_none() => Ok(Zone::utc()),
            Err(e) => Err(format!(
                "TZ='{}': not a time zone ({e}; is the tzdata package installed?)",
                crate::paths::escaped(&std::env::var("TZ").unwrap_or_default())
            )),
        }
    }

    /// The instant of a wall-clock reading in this zone.
    fn to_epoch(&self, c: &Civil) -> Result<i64, String> {
        let local = c.seconds();
        let w = self.window.get();
        if w.lo <= local && local < w.hi {
            return Ok(local - w.offset);
        }
        let bad = |e: jiff::Error| format!("not a time in {}: {e}", self.name());
        let dt =
            jiff::civil::DateTime::new(c.y, c.mo, c.d, c.h, c.mi, c.s.min(59), 0).map_err(bad)?;
        let t = self
            .tz
            .to_ambiguous_timestamp(dt)
            .compatible()
            .map_err(bad)?;
        let epoch = t.as_second() + i64::from(c.s == 60);
        let offset = local - epoch;
        if offset != i64::from(self.tz.to_offset(t).seconds()) {
            // A reading in a skipped hour: moved forward, it does not carry
            // the offset of the span it lands in. Nothing to cache.
            return Ok(epoch);
        }
        // The span between the transitions around `t` has this one offset.
        let after = t
            .checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap_or(t);
        let lo = self.tz.preceding(after).next().map(|x| x.timestamp());
        let hi = self.tz.following(t).next().map(|x| x.timestamp());
        let edge = |x: Option<jiff::Timestamp>, far: i64, margin: i64| {
            x.map_or(far, |x| x.as_second() + offset + margin)
        };
        self.window.set(Window {
            lo: edge(lo, i64::MIN, WINDOW_MARGIN_S),
            hi: edge(hi, i64::MAX, -WINDOW_MARGIN_S),
            offset,
        });
        Ok(epoch)
    }

    /// The zone's name for messages.
    pub fn name(&self) -> &str {
        self.tz.iana_name().unwrap_or("the local time zone")
    }

    /// Parses a time as sacct prints it: local wall-clock time
    /// (`2026-07-01T12:00:00`, read in this zone), the same with an offset
    /// (`2026-07-01T12:00:00+02:00`, `...Z`), or Unix seconds (`1782921600`,
    /// from `SLURM_TIME_FORMAT=%s`). `Unknown`, `None`, `N/A`, empty and `0`
    /// give `None`.
    pub fn parse(&self, s: &str) -> Result<Option<Timestamp>, String> {
        let s = s.trim_ascii();
        if is_no_time(s) {
            return Ok(None);
        }
        let bad = || format!("'{s}': not a timestamp");
        if s.bytes().all(|b| b.is_ascii_digit()) {
            // Unix seconds: 12 digits reach past the year 33000.
            return match parse_uint(s) {
                Some(v) if s.len() <= 12 => Ok(Some(Timestamp { epoch: v as i64 })),
                _ => Err(bad()),
            };
        }
        let c = Civil::parse(s).ok_or_else(bad)?;
        let epoch = match s.get(19..) {
            Some("") => self.to_epoch(&c).map_err(|e| format!("'{s}': {e}"))?,
            Some(off) => c.seconds() - parse_offset(off).ok_or_else(bad)?,
            None => return Err(bad()),
        };
        Ok(Some(Timestamp { epoch }))
    }
}

fn days_in_month(y: i64, m: u32) -> u64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// A date given on a command line (`--since`, `--until`) as epoch seconds:
/// `YYYY-MM-DD` (midnight UTC), `YYYY-MM-DDTHH:MM:SS` (UTC), or RFC 3339
/// with an offset.
pub fn parse_date(s: &str) -> Result<i64, String> {
    let bad = || format!("'{s}': not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)");
    if let Some(t) = Timestamp::from_rfc3339(s) {
        return Ok(t.epoch);
    }
    let full = match s.len() {
        10 => format!("{s}T00:00:00"),
        _ => s.to_string(),
    };
    match parse_timestamp(&full, 0) {
        Ok(Some(t)) => Ok(t.epoch),
        _ => Err(bad()),
    }
}

/// Memory in MiB as sbatch's `--mem` takes it: `64G` when whole GiB,
/// else `1001M` (MiB rounded up, at least 1: a job is never given less
/// than the figure, and `--mem=0` would be all of each node's memory).
pub fn format_mem(mb: f64) -> String {
    if mb >= 1024.0 && (mb / 1024.0).fract() == 0.0 {
        format!("{}G", mb / 1024.0)
    } else {
        format!("{}M", mb.ceil().max(1.0))
    }
}

/// The job an array task or a heterogeneous component belongs to: `123`
/// for `123_4`, `123_[1-5]` and `123+0`; the id itself otherwise. An
/// `analysis` record of an array is keyed by this id.
pub fn parent_job_id(id: &str) -> &str {
    id.split(['_', '+']).next().unwrap_or(id)
}

/// A duration as SLURM writes one (`[D-]HH:MM:SS`), whole seconds rounded
/// up: what `--time` takes back.
pub fn format_duration(secs: f64) -> String {
    let s = secs.max(0.0).ceil() as u64;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian, counted by
/// jiff). A day past its month's end rolls over into the next month; years
/// outside jiff's -9999..=9999 are taken as the nearest of those.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let first = jiff::civil::Date::new(y.clamp(-9999, 9999) as i16, m.clamp(1, 12) as i8, 1)
        .expect("the first of a month in jiff's range is a date");
    let days = jiff::civil::date(1970, 1, 1)
        .until(first)
        .expect("dates in jiff's range are a span apart")
        .get_days();
    i64::from(days) + i64::from(d) - 1
}

/// The civil date and time (UTC) of an epoch second, as (year, month, day,
/// hour, minute, second), through jiff; seconds outside its range are
/// taken as its first or last.
pub fn civil_from_epoch(epoch: i64) -> (i64, u32, u32, u32, u32, u32) {
    let ts = jiff::Timestamp::from_second(epoch).unwrap_or(if epoch < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    });
    let t = jiff::tz::Offset::UTC.to_datetime(ts);
    let n = |v: i8| v as u32;
    (
        i64::from(t.year()),
        n(t.month()),
        n(t.day()),
        n(t.hour()),
        n(t.minute()),
        n(t.second()),
    )
}

/// The step part of a job id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `.batch`
    Batch,
    /// `.extern`
    Extern,
    /// `.interactive`
    Interactive,
    /// `.N`, a numbered (srun) step.
    Numbered(u32),
    /// Any other step name SLURM may print (kept as text).
    Other(String),
}

/// A parsed SLURM job id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobId<'a> {
    /// The job part, without the step (`123`, `123_4`, `123_[1-5%2]`, `123+1`).
    pub job: &'a str,
    /// The leading numeric id (`123` in all the forms above).
    pub base: u64,
    /// The array task index, for `123_4`.
    pub array_task: Option<u32>,
    /// The unexpanded array range, for `123_[1-5%2]`.
    pub array_range: Option<&'a str>,
    /// The heterogeneous component, for `123+1`.
    pub het_offset: Option<u32>,
    /// The step, when the id names one.
    pub step: Option<Step>,
}

/// Parses a job id as sacct prints it in `JobID` or `JobIDRaw`.
pub fn parse_job_id(s: &str) -> Result<JobId<'_>, String> {
    let s = s.trim_ascii();
    let bad = |why: &str| format!("'{s}': {why}");
    let (job, step) = match s.find('.') {
        Some(i) => {
            let st = &s[i + 1..];
            let step = match st {
                "batch" => Step::Batch,
                "extern" => Step::Extern,
                "interactive" => Step::Interactive,
                "" => return Err(bad("empty step")),
                _ => match parse_uint(st) {
                    Some(n) if n <= u64::from(u32::MAX) => Step::Numbered(n as u32),
                    _ if st.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                        Step::Other(st.to_string())
                    }
                    _ => return Err(bad("bad step")),
                },
            };
            (&s[..i], Some(step))
        }
        None => (s, None),
    };
    let digits_end = job
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(job.len());
    let base = parse_uint(&job[..digits_end]).ok_or_else(|| bad("not a job id"))?;
    let rest = &job[digits_end..];
    let mut id = JobId {
        job,
        base,
        array_task: None,
        array_range: None,
        het_offset: None,
        step,
    };
    if rest.is_empty() {
        return Ok(id);
    }
    if let Some(t) = rest.strip_prefix('_') {
        if t.starts_with('[') && t.ends_with(']') && t.len() > 2 {
            let inner = &t[1..t.len() - 1];
            if !inner
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b',' | b'%' | b':'))
            {
                return Err(bad("bad array range"));
            }
            id.array_range = Some(inner);
        } else {
            let n = parse_uint(t).ok_or_else(|| bad("bad array index"))?;
            id.array_task = Some(u32::try_from(n).map_err(|_| bad("array index too large"))?);
        }
        return Ok(id);
    }
    if let Some(t) = rest.strip_prefix('+') {
        let n = parse_uint(t).ok_or_else(|| bad("bad het component"))?;
        id.het_offset = Some(u32::try_from(n).map_err(|_| bad("het component too large"))?);
        return Ok(id);
    }
    Err(bad("not a job id"))
}

/// The job states that mean the job has ended for good.
pub fn state_is_final(state: &str) -> bool {
    !matches!(
        state,
        "PENDING"
            | "RUNNING"
            | "REQUEUED"
            | "RESIZING"
            | "SUSPENDED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "STOPPED"
            | "SIGNALING"
            | "STAGE_OUT"
            | "CONFIGURING"
            | "COMPLETING"
    )
}

/// Normalises a state: `CANCELLED by 42` gives `("CANCELLED", Some(42))`;
/// a trailing `+` (truncated display) is dropped.
pub fn parse_state(s: &str) -> Result<(&str, Option<u32>), String> {
    let s = s.trim_ascii().trim_end_matches('+');
    if s.is_empty() {
        return Err("empty state".into());
    }
    if let Some(rest) = s.strip_prefix("CANCELLED by ") {
        let uid = parse_uint(rest.trim_ascii())
            .and_then(|u| u32::try_from(u).ok())
            .ok_or_else(|| format!("'{s}': bad uid"))?;
        return Ok(("CANCELLED", Some(uid)));
    }
    if !s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return Err(format!("'{s}': not a job state"));
    }
    Ok((s, None))
}

/// What an `AllocTRES`/`ReqTRES` list holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tres {
    /// `cpu=`
    pub cpu: Option<u64>,
    /// `mem=` in MiB.
    pub mem_mb: Option<f64>,
    /// `node=`
    pub node: Option<u64>,
    /// `billing=`
    pub billing: Option<u64>,
    /// GPUs: `gres/gpu=N`, or the sum of `gres/gpu:type=N` when no plain count is given.
    pub gpus: Option<u64>,
}

/// Parses a TRES list such as `billing=1,cpu=1,mem=1G,node=1,gres/gpu=2,gres/gpu:a100=2`.
/// Typed GPU counts are not added to the plain `gres/gpu` count (SLURM lists both).
pub fn parse_tres(s: &str) -> Result<Tres, String> {
    let mut t = Tres::default();
    let mut typed_gpus: Option<u64> = None;
    for item in s.trim_ascii().split(',').filter(|x| !x.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}': not key=value"))?;
        let count = || parse_uint(v).ok_or_else(|| format!("'{item}': not a count"));
        match k {
            "cpu" => t.cpu = Some(count()?),
            "node" => t.node = Some(count()?),
            "billing" => t.billing = Some(count()?),
            "mem" => {
                t.mem_mb = parse_mem(v, 1024.0 * 1024.0)
                    .map_err(|e| format!("mem: {e}"))?
                    .map(|m| m.mb)
            }
            "gres/gpu" => t.gpus = Some(count()?),
            _ if k.starts_with("gres/gpu:") => {
                typed_gpus = Some(typed_gpus.unwrap_or(0) + count()?);
            }
            _ => {}
        }
    }
    if t.gpus.is_none() {
        t.gpus = typed_gpus;
    }
    Ok(t)
}

/// Parses an exit code `N:S` (code and signal).
pub fn parse_exit_code(s: &str) -> Result<Option<(u32, u32)>, String> {
    let s = s.trim_ascii();
    if s.is_empty() {
        return Ok(None);
    }
    let (c, sig) = s.split_once(':').unwrap_or((s, "0"));
    match (parse_uint(c), parse_uint(sig)) {
        (Some(c), Some(g)) if c <= 255 && g <= 255 => Ok(Some((c as u32, g as u32))),
        _ => Err(format!("'{s}': not an exit code")),
    }
}

/// Expands a SLURM host list (`n[001-003,7],gpu1`) into host names.
/// Ranges keep their zero padding. Lists that expand to more than `limit`
/// hosts are an error (a guard against `n[0-999999999]`).
pub fn expand_hostlist(s: &str, limit: usize) -> Result<Vec<String>, String> {
    let s = s.trim_ascii();
    let mut out = Vec::new();
    if s.is_empty() || s == "None assigned" {
        return Ok(out);
    }
    // Split on commas outside brackets.
    let mut depth = 0;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("'{s}': unbalanced brackets"));
        }
    }
    if depth != 0 {
        return Err(format!("'{s}': unbalanced brackets"));
    }
    items.push(&s[start..]);
    for item in items {
        let Some(open) = item.find('[') else {
            if item.is_empty() {
                return Err(format!("'{s}': empty host name"));
            }
            out.push(item.to_string());
            continue;
        };
        let close = item.rfind(']').ok_or_else(|| format!("'{item}': no ']'"))?;
        let (prefix, suffix) = (&item[..open], &item[close + 1..]);
        for part in item[open + 1..close].split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (lo, hi) = (
                parse_uint(a).ok_or_else(|| format!("'{part}': not a range"))?,
                parse_uint(b).ok_or_else(|| format!("'{part}': not a range"))?,
            );
            if hi < lo {
                return Err(format!("'{part}': range runs backwards"));
            }
            if out.len() as u64 + (hi - lo + 1) > limit as u64 {
                return Err(format!("'{s}': more than {limit} hosts"));
            }
            let width = a.len();
            for n in lo..=hi {
                out.push(format!("{prefix}{n:0width$}{suffix}"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_parent_of_an_array_task_or_a_component_is_its_job() {
        for (id, parent) in [
            ("123_4", "123"),
            ("123_[1-5]", "123"),
            ("123+0", "123"),
            ("123", "123"),
        ] {
            assert_eq!(parent_job_id(id), parent);
        }
    }

    use super::*;

    const MB: f64 = 1024.0 * 1024.0;

    #[test]
    fn memory_sizes() {
        let m = |s| parse_mem(s, MB).unwrap().unwrap();
        assert_eq!(m("312.50G").mb, 320000.0);
        assert_eq!(m("1G").mb, 1024.0);
        assert_eq!(m("16000M").mb, 16000.0);
        assert_eq!(m("16000").mb, 16000.0);
        assert_eq!(m("0").mb, 0.0);
        assert_eq!(m("2T").mb, 2.0 * 1024.0 * 1024.0);
        let k = parse_mem("322212K", 1.0).unwrap().unwrap();
        assert!((k.mb - 314.660_156_25).abs() < 1e-9);
        assert_eq!(parse_mem("", MB).unwrap(), None);
        let n = m("1Gn");
        assert_eq!(n.scope, MemScope::PerNode);
        assert_eq!(n.total_mb(4, 16), 4096.0);
        let c = m("4000Mc");
        assert_eq!(c.scope, MemScope::PerCpu);
        assert_eq!(c.total_mb(1, 16), 64000.0);
        assert_eq!(m("191846Mn").total_mb(20, 720), 3836920.0);
        assert!(parse_mem("12X", MB).is_err());
        assert!(parse_mem("G", MB).is_err());
        assert!(parse_mem("1.2.3G", MB).is_err());
        assert!(parse_mem("n", MB).is_err());
    }

    #[test]
    fn durations() {
        let d = |s| parse_duration(s).unwrap().unwrap();
        assert_eq!(d("09:28.052"), 568.052);
        assert_eq!(d("00:00.007"), 0.007);
        assert_eq!(d("01:27:29"), 5249.0);
        assert_eq!(d("2-07:51:43"), 201103.0);
        assert_eq!(d("451-06:00:24"), 38988024.0);
        assert_eq!(d("1-00:00:00"), 86400.0);
        assert_eq!(d("1-02"), 93600.0);
        assert_eq!(d("1-02:30"), 95400.0);
        assert_eq!(parse_duration("").unwrap(), None);
        assert_eq!(parse_duration("INVALID").unwrap(), None);
        assert_eq!(parse_limit("UNLIMITED").unwrap(), Some(Limit::Unlimited));
        assert_eq!(
            parse_limit("Partition_Limit").unwrap(),
            Some(Limit::PartitionLimit)
        );
        assert!(parse_duration("UNLIMITED").is_err());
        assert!(parse_duration("1-2x:00").is_err());
        assert!(parse_duration("1:2:3:4").is_err());
        assert!(parse_duration("-").is_err());
        assert!(parse_duration("01.5:00:00").is_err());
    }

    #[test]
    fn timestamps() {
        let t = parse_timestamp("2026-11-21T23:28:56", 0).unwrap().unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-21T23:28:56Z");
        assert_eq!(Timestamp::from_rfc3339(&t.to_rfc3339()), Some(t));
        let shifted = parse_timestamp("2026-11-21T23:28:56", 3600)
            .unwrap()
            .unwrap();
        assert_eq!(shifted.epoch, t.epoch - 3600);
        assert_eq!(parse_timestamp("Unknown", 0).unwrap(), None);
        assert_eq!(parse_timestamp("None", 0).unwrap(), None);
        assert!(parse_timestamp("2026-13-01T00:00:00", 0).is_err());
        assert!(parse_timestamp("2026-02-30T00:00:00", 0).is_err());
        assert!(parse_timestamp("yesterday", 0).is_err());
        assert_eq!(
            parse_timestamp("1970-01-01T00:00:00", 0)
                .unwrap()
                .unwrap()
                .epoch,
            0
        );
        assert_eq!(civil_from_epoch(951782400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(format_mem(65536.0), "64G");
        assert_eq!(format_mem(1000.4), "1001M");
        assert_eq!(format_mem(0.3), "1M");
        assert_eq!(format_mem(1536.0), "1536M");
        assert_eq!(parse_date("1970-01-02"), Ok(86400));
        assert_eq!(parse_date("1970-01-01T01:00:00"), Ok(3600));
        assert_eq!(parse_date("1970-01-01T02:00:00+01:00"), Ok(3600));
        assert!(parse_date("1970-13-01").is_err());
        assert!(parse_date("yesterday").is_err());
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
        assert_eq!(
            days_from_civil(1900, 3, 1) - days_from_civil(1900, 2, 28),
            1
        );
        // A day past the month's end rolls over, as the hand-written arithmetic did.
        assert_eq!(days_from_civil(2026, 2, 29), days_from_civil(2026, 3, 1));
        assert_eq!(days_from_civil(1970, 1, 1), 0);
    }

    /// A zone of the system's time zone database. The zones these tests use
    /// must be there: a machine without the tzdata package fails them
    /// rather than skipping them.
    fn zone(name: &str) -> Zone {
        Zone::named(name).unwrap_or_else(|e| panic!("{e}"))
    }

    fn utc_of(z: &Zone, s: &str) -> String {
        z.parse(s).unwrap().unwrap().to_rfc3339()
    }

    #[test]
    fn local_times_take_the_offset_of_their_own_date() {
        let ny = zone("America/New_York");
        // Summer (EDT, -4) and winter (EST, -5), in both orders, so the
        // cached window of one season is never used for the other.
        for _ in 0..2 {
            assert_eq!(utc_of(&ny, "2026-07-01T12:00:00"), "2026-07-01T16:00:00Z");
            assert_eq!(utc_of(&ny, "2026-01-15T12:00:00"), "2026-01-15T17:00:00Z");
        }
        // Around the 2026 transitions (8 March, 1 November), inside the
        // cache margin and just outside it.
        assert_eq!(utc_of(&ny, "2026-03-07T12:00:00"), "2026-03-07T17:00:00Z");
        assert_eq!(utc_of(&ny, "2026-03-08T01:59:59"), "2026-03-08T06:59:59Z");
        assert_eq!(utc_of(&ny, "2026-03-08T03:00:00"), "2026-03-08T07:00:00Z");
        assert_eq!(utc_of(&ny, "2026-03-11T12:00:00"), "2026-03-11T16:00:00Z");
        assert_eq!(utc_of(&ny, "2026-10-31T23:00:00"), "2026-11-01T03:00:00Z");
        assert_eq!(utc_of(&ny, "2026-11-01T02:00:00"), "2026-11-01T07:00:00Z");
        let syd = zone("Australia/Sydney");
        assert_eq!(utc_of(&syd, "2026-01-15T12:00:00"), "2026-01-15T01:00:00Z");
        assert_eq!(utc_of(&syd, "2026-07-01T12:00:00"), "2026-07-01T02:00:00Z");
        assert_eq!(
            utc_of(&Zone::utc(), "2026-07-01T12:00:00"),
            "2026-07-01T12:00:00Z"
        );
    }

    #[test]
    fn the_repeated_hour_is_the_first_and_the_skipped_hour_moves_forward() {
        let ny = zone("America/New_York");
        // 1 November 2026: 01:30 happens at -4 and again at -5; the first.
        assert_eq!(utc_of(&ny, "2026-11-01T01:30:00"), "2026-11-01T05:30:00Z");
        // 8 March 2026: 02:30 does not exist; read at -5, that is 03:30 EDT.
        assert_eq!(utc_of(&ny, "2026-03-08T02:30:00"), "2026-03-08T07:30:00Z");
    }

    #[test]
    fn offsets_and_unix_seconds_are_read_as_they_are() {
        let ny = zone("America/New_York");
        assert_eq!(utc_of(&ny, "2026-07-01T12:00:00Z"), "2026-07-01T12:00:00Z");
        assert_eq!(
            utc_of(&ny, "2026-07-01T12:00:00+02:00"),
            "2026-07-01T10:00:00Z"
        );
        assert_eq!(
            utc_of(&ny, "2026-07-01T12:00:00-0330"),
            "2026-07-01T15:30:00Z"
        );
        assert_eq!(utc_of(&ny, "1782907200"), "2026-07-01T12:00:00Z");
        assert_eq!(ny.parse(" Unknown ").unwrap(), None);
        assert_eq!(ny.parse("0").unwrap(), None);
        for bad in [
            "2026-07-01T12:00:00+2",
            "2026-07-01T12:00:00+02:00x",
            "2026-07-01T12:00",
            "2026-02-30T00:00:00",
            "12345678901234",
            "-5",
            "yesterday",
        ] {
            assert!(ny.parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_system_zone_follows_tz() {
        // TZ is read by each call; this test alone sets it in this process.
        std::env::set_var("TZ", ":America/New_York");
        let ny = Zone::system();
        std::env::set_var("TZ", "No/Such_Zone");
        let none = Zone::system();
        std::env::remove_var("TZ");
        let ny = ny.unwrap();
        assert_eq!(utc_of(&ny, "2026-07-01T12:00:00"), "2026-07-01T16:00:00Z");
        let e = none.unwrap_err();
        assert!(e.contains("TZ='No/Such_Zone'"), "{e}");
    }

    #[test]
    fn job_ids() {
        let j = parse_job_id("123").unwrap();
        assert_eq!((j.job, j.base, j.step), ("123", 123, None));
        let j = parse_job_id("24220929_421.batch").unwrap();
        assert_eq!(j.job, "24220929_421");
        assert_eq!(j.array_task, Some(421));
        assert_eq!(j.step, Some(Step::Batch));
        let j = parse_job_id("123_[1-5%2]").unwrap();
        assert_eq!(j.array_range, Some("1-5%2"));
        let j = parse_job_id("123+1.0").unwrap();
        assert_eq!((j.het_offset, j.step), (Some(1), Some(Step::Numbered(0))));
        assert_eq!(parse_job_id("5.extern").unwrap().step, Some(Step::Extern));
        assert_eq!(
            parse_job_id("5.interactive").unwrap().step,
            Some(Step::Interactive)
        );
        assert_eq!(
            parse_job_id("65638294.35").unwrap().step,
            Some(Step::Numbered(35))
        );
        for bad in ["", "abc", "12_x", "12.", "12+", "12_[a]", "1.2.3$"] {
            assert!(parse_job_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn states() {
        assert_eq!(
            parse_state("CANCELLED by 129319").unwrap(),
            ("CANCELLED", Some(129319))
        );
        assert_eq!(parse_state("COMPLETED").unwrap(), ("COMPLETED", None));
        assert_eq!(parse_state("CANCELLED+").unwrap(), ("CANCELLED", None));
        assert!(parse_state("done!").is_err());
        assert!(parse_state("CANCELLED by x").is_err());
        assert!(state_is_final("OUT_OF_MEMORY"));
        assert!(!state_is_final("RUNNING"));
        assert!(!state_is_final("PENDING"));
    }

    #[test]
    fn tres_lists() {
        let t = parse_tres("billing=1,cpu=2,mem=1G,node=1").unwrap();
        assert_eq!(
            (t.cpu, t.mem_mb, t.node, t.gpus),
            (Some(2), Some(1024.0), Some(1), None)
        );
        let t = parse_tres("cpu=8,gres/gpu=2,gres/gpu:a100=2").unwrap();
        assert_eq!(t.gpus, Some(2));
        let t = parse_tres("cpu=8,gres/gpu:a100=2,gres/gpu:v100=1").unwrap();
        assert_eq!(t.gpus, Some(3));
        assert_eq!(parse_tres("").unwrap(), Tres::default());
        assert!(parse_tres("cpu").is_err());
        assert!(parse_tres("cpu=x").is_err());
    }

    #[test]
    fn host_lists() {
        let h = |s| expand_hostlist(s, 100).unwrap();
        assert_eq!(h("vm"), vec!["vm"]);
        assert_eq!(h("n[001-003],gpu7"), vec!["n001", "n002", "n003", "gpu7"]);
        assert_eq!(h("a[1,3-4]b"), vec!["a1b", "a3b", "a4b"]);
        assert!(h("None assigned").is_empty());
        assert!(expand_hostlist("n[1-1000]", 100).is_err());
        assert!(expand_hostlist("n[3-1]", 100).is_err());
        assert!(expand_hostlist("n[1-2", 100).is_err());
    }

    #[test]
    fn exit_codes() {
        assert_eq!(parse_exit_code("0:125").unwrap(), Some((0, 125)));
        assert_eq!(parse_exit_code("").unwrap(), None);
        assert!(parse_exit_code("a:b").is_err());
    }

    #[test]
    fn a_skipped_hour_does_not_poison_the_cached_offset() {
        // Found by the property test below: the gap reading was cached with
        // the offset from before the gap for the span after it.
        let z = zone("America/New_York");
        let gap = z.parse("2026-03-08T02:00:00").unwrap().unwrap();
        assert_eq!(gap.to_rfc3339(), "2026-03-08T07:00:00Z");
        let later = z.parse("2026-03-10T02:00:00").unwrap().unwrap();
        assert_eq!(later.to_rfc3339(), "2026-03-10T06:00:00Z");
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,40}") {
            let _ = parse_mem(&s, MB);
            let _ = parse_limit(&s);
            let _ = parse_timestamp(&s, 0);
            let _ = Zone::utc().parse(&s);
            let _ = parse_job_id(&s);
            let _ = parse_state(&s);
            let _ = parse_tres(&s);
            let _ = parse_exit_code(&s);
            let _ = expand_hostlist(&s, 1000);
        }

        #[test]
        fn the_cached_offset_agrees_with_the_full_rules(
            times in proptest::collection::vec((1970i64..2100, 1u32..=12, 1u32..=28, 0u32..24, 0u32..60, 0u32..60), 1..60),
            spread in 0i64..3,
        ) {
            // One zone reused (its cache in play) against a fresh one each time.
            let cached = zone("America/New_York");
            for (i, (y, mo, d, h, mi, sec)) in times.into_iter().enumerate() {
                // Some runs of nearby dates, some far apart.
                let y = if spread == 0 { 2026 } else { y };
                let d = if spread == 1 { 1 + (i as u32 % 3) } else { d };
                let text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}");
                let fresh = zone("America/New_York").parse(&text).unwrap();
                proptest::prop_assert_eq!(cached.parse(&text).unwrap(), fresh, "{}", text);
            }
        }

        #[test]
        fn durations_round_trip(d in 0u64..1000, h in 0u64..24, m in 0u64..60, sec in 0u64..60) {
            let text = format!("{d}-{h:02}:{m:02}:{sec:02}");
            let v = parse_duration(&text).unwrap().unwrap();
            proptest::prop_assert_eq!(v, (d * 86400 + h * 3600 + m * 60 + sec) as f64);
            proptest::prop_assert_eq!(parse_duration(&format_duration(v)).unwrap(), Some(v));
        }

        #[test]
        fn epoch_round_trip(e in -10_000_000_000i64..10_000_000_000i64) {
            let (y, mo, d, h, mi, s) = civil_from_epoch(e);
            let back = days_from_civil(y, mo, d) * 86400 + i64::from(h * 3600 + mi * 60 + s);
            proptest::prop_assert_eq!(back, e);
        }
    }
}
