//! The `#SBATCH` directives of a batch script, read as `sbatch` reads them:
//! lines that start with `#SBATCH` (or the old `#SLURM`) in column 0, up to
//! the first line that is neither blank nor a comment. Each directive line
//! is split like sbatch splits it (quotes group, a backslash escapes, an
//! unquoted `#` starts a comment) and the options that size a job are kept;
//! the others (`--output`, `--mail-user`, ...) are skipped.

use hpc_core::advice::Request;
use hpc_core::slurm;

/// What a directive sets; one entry per option in [`OPTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Mem,
    MemPerCpu,
    MemPerGpu,
    CpusPerTask,
    CpusPerGpu,
    Ntasks,
    NtasksPerNode,
    Nodes,
    Time,
    Gres,
    Gpus,
    GpusPerNode,
    GpusPerTask,
    Array,
    Partition,
    Account,
    Qos,
    JobName,
}

/// The options read: long name, short letter, what it sets. Every one takes
/// a value.
const OPTIONS: &[(&str, Option<char>, Key)] = &[
    ("mem", None, Key::Mem),
    ("mem-per-cpu", None, Key::MemPerCpu),
    ("mem-per-gpu", None, Key::MemPerGpu),
    ("cpus-per-task", Some('c'), Key::CpusPerTask),
    ("cpus-per-gpu", None, Key::CpusPerGpu),
    ("ntasks", Some('n'), Key::Ntasks),
    ("ntasks-per-node", None, Key::NtasksPerNode),
    ("nodes", Some('N'), Key::Nodes),
    ("time", Some('t'), Key::Time),
    ("gres", None, Key::Gres),
    ("gpus", Some('G'), Key::Gpus),
    ("gpus-per-node", None, Key::GpusPerNode),
    ("gpus-per-task", None, Key::GpusPerTask),
    ("array", Some('a'), Key::Array),
    ("partition", Some('p'), Key::Partition),
    ("account", Some('A'), Key::Account),
    ("qos", Some('q'), Key::Qos),
    ("job-name", Some('J'), Key::JobName),
];

/// Options that srun takes as sbatch does and that shape what a job is
/// given, beside those of [`OPTIONS`]: long name, short letter, whether it
/// takes a value. `hpc interactive` passes them on (see
/// [`Directives::srun_options`]): srun reads no `#SBATCH` line.
const SRUN_ALSO: &[(&str, Option<char>, bool)] = &[
    ("constraint", Some('C'), true),
    ("nodelist", Some('w'), true),
    ("exclude", Some('x'), true),
    ("reservation", None, true),
    ("tmp", None, true),
    ("licenses", Some('L'), true),
    ("time-min", None, true),
    ("mincpus", None, true),
    ("hint", None, true),
    ("sockets-per-node", None, true),
    ("cores-per-socket", None, true),
    ("threads-per-core", None, true),
    ("gpus-per-socket", None, true),
    ("gpu-bind", None, true),
    ("mem-bind", None, true),
    ("core-spec", Some('S'), true),
    ("thread-spec", None, true),
    ("clusters", Some('M'), true),
    ("wckey", None, true),
    ("prefer", None, true),
    ("chdir", Some('D'), true),
    ("exclusive", None, false),
    ("contiguous", None, false),
    ("overcommit", Some('O'), false),
    ("oversubscribe", Some('s'), false),
];

/// The task layout: one interactive shell is one task, so `hpc
/// interactive` leaves these out (srun --pty would start a shell a task).
const LAYOUT: &[Key] = &[Key::Nodes, Key::Ntasks, Key::NtasksPerNode];

/// How the memory was asked for (the last of `--mem`, `--mem-per-cpu`,
/// `--mem-per-gpu` wins).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemPer {
    /// `--mem`: MiB per node.
    Node(f64),
    /// `--mem-per-cpu`: MiB per CPU.
    Cpu(f64),
    /// `--mem-per-gpu`: MiB per GPU.
    Gpu(f64),
}

/// A GPU count with its optional type, and what it counts per.
#[derive(Debug, Clone, PartialEq)]
struct Gpus {
    count: u32,
    kind: Option<String>,
}

/// The values as written, before the per-node/per-task products.
#[derive(Debug, Default, Clone)]
struct Raw {
    mem: Option<MemPer>,
    cpus_per_task: Option<u32>,
    cpus_per_gpu: Option<u32>,
    ntasks: Option<u32>,
    ntasks_per_node: Option<u32>,
    nodes: Option<u32>,
    time_s: Option<f64>,
    gres: Option<Gpus>,
    /// The `--gres` list as written (its other entries are kept).
    gres_text: Option<String>,
    gpus: Option<Gpus>,
    gpus_per_node: Option<Gpus>,
    gpus_per_task: Option<Gpus>,
    exclusive: bool,
    request: Request,
    /// Each option srun takes too, as `--name=value` (or `--name`), with
    /// the slot a later one replaces it in (the long name; `mem` for the
    /// three memory options); the layout's in `layout`.
    carried: Vec<(&'static str, String)>,
    layout: Vec<String>,
}

impl Raw {
    /// `other`'s values over these (the command line over the script).
    fn overlay(&mut self, other: Raw) {
        macro_rules! over {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* };
        }
        over!(
            mem,
            cpus_per_task,
            cpus_per_gpu,
            ntasks,
            ntasks_per_node,
            nodes,
            time_s,
            gres,
            gres_text,
            gpus,
            gpus_per_node,
            gpus_per_task
        );
        let (mine, theirs) = (&mut self.request, other.request);
        for (a, b) in [
            (&mut mine.array, theirs.array),
            (&mut mine.partition, theirs.partition),
            (&mut mine.account, theirs.account),
            (&mut mine.qos, theirs.qos),
            (&mut mine.job_name, theirs.job_name),
        ] {
            if b.is_some() {
                *a = b;
            }
        }
        self.exclusive |= other.exclusive;
    }
}

/// What a resource is asked for in, as the script (or command line) wrote it:
/// the unit the advice for it is written back in.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// `--mem` per node, `--mem-per-cpu`, `--mem-per-gpu` (MiB).
    Mem(MemPer),
    /// `--gpus` (job), `--gpus-per-node`, `--gpus-per-task`, `--gres=gpu:...`
    /// (per node), with the type.
    Gpus(&'static str, Option<String>),
}

/// The directive block of a batch script (and the command line over it) as
/// sbatch reads it.
#[derive(Debug, Clone, Default)]
pub struct Directives {
    raw: Raw,
    /// The script has a `hetjob` (or `packjob`) separator: components. The
    /// directives read are the first component's, where the script runs;
    /// each later one is an allocation of its own, and laying its options
    /// over the first's gave a request no component has (the second's
    /// memory and CPUs with the first's GPUs).
    pub hetjob: bool,
    /// The line index (0-based) of the first command: the block is above.
    pub block_end: usize,
    /// The resources the command line sets (`mem`, `cpus`, `time`, `gpus`).
    pub from_cli: Vec<&'static str>,
}

impl Directives {
    /// Reads the directive block of `text`.
    pub fn read(text: &str) -> Result<Directives, DirectiveError> {
        let mut d = Directives::default();
        let lines: Vec<&str> = text.lines().collect();
        d.block_end = lines.len();
        for (i, line) in lines.iter().enumerate() {
            let rest = match line
                .strip_prefix("#SBATCH")
                .or_else(|| line.strip_prefix("#SLURM"))
            {
                Some(rest) => rest,
                None if is_command(line) => {
                    d.block_end = i;
                    break;
                }
                None => continue,
            };
            if d.hetjob {
                // A later component's: its own allocation, not the one
                // the script runs in (see `Directives::hetjob`).
                continue;
            }
            let mut words = split_words(rest);
            if let Some(at) = words.iter().position(|w| w == "hetjob" || w == "packjob") {
                d.hetjob = true;
                words.truncate(at);
            }
            apply_words(&mut d.raw, &words).map_err(|reason| DirectiveError {
                line: i + 1,
                reason,
            })?;
        }
        Ok(d)
    }

    /// Lays the sbatch options of the command line over the script's; what
    /// they set is listed in [`Directives::from_cli`]. A bad option is a
    /// usage error (`the sbatch options: --mem 'x': ...`).
    pub fn with_cli(mut self, args: &[String]) -> hpc_core::Result<Directives> {
        let mut cli = Raw::default();
        apply_words(&mut cli, args)
            .map_err(|e| hpc_core::Error::Usage(format!("the sbatch options: {e}")))?;
        let gpus = cli.gpus.is_some()
            || cli.gpus_per_node.is_some()
            || cli.gpus_per_task.is_some()
            || cli.gres.is_some();
        for (set, name) in [
            (cli.mem.is_some(), "mem"),
            (
                cli.cpus_per_task.is_some() || cli.cpus_per_gpu.is_some(),
                "cpus",
            ),
            (cli.time_s.is_some(), "time"),
            (gpus, "gpus"),
        ] {
            if set {
                self.from_cli.push(name);
            }
        }
        self.raw.overlay(cli);
        Ok(self)
    }

    /// The whole-job totals (see [`parse_directives`]).
    pub fn request(&self) -> Request {
        totals(self.raw.clone())
    }

    /// Nodes and tasks as sbatch will give them (1 when not asked).
    pub fn nodes_tasks(&self) -> (u32, u32) {
        let r = self.request();
        (r.nodes.unwrap_or(1), r.ntasks.unwrap_or(1))
    }

    /// How memory was asked for.
    pub fn mem(&self) -> Option<MemPer> {
        self.raw.mem
    }

    /// True with `--mem=0` (all of each node's memory).
    pub fn mem_zero(&self) -> bool {
        matches!(self.raw.mem, Some(MemPer::Node(m)) if m == 0.0)
    }

    /// True with `--exclusive`.
    pub fn exclusive(&self) -> bool {
        self.raw.exclusive
    }

    /// True when `--cpus-per-task` was given.
    pub fn has_cpus_per_task(&self) -> bool {
        self.raw.cpus_per_task.is_some()
    }

    /// `--cpus-per-gpu`, when given (the job's CPUs follow its GPUs).
    pub fn cpus_per_gpu(&self) -> Option<u32> {
        self.raw.cpus_per_gpu
    }

    /// The `--gres` list with its `gpu` entry replaced by `gpu` (`gpu:2`,
    /// `gpu:a100:2`), every other entry kept as written.
    pub fn gres_with(&self, gpu: &str) -> String {
        let list = self.raw.gres_text.as_deref().unwrap_or("");
        let mut out: Vec<String> = Vec::new();
        let mut done = false;
        for entry in list.split(',').filter(|e| !e.is_empty()) {
            let bare = entry.strip_prefix("gres/").unwrap_or(entry);
            if !done && (bare == "gpu" || bare.starts_with("gpu:") || bare.starts_with("gpu(")) {
                out.push(gpu.to_string());
                done = true;
            } else {
                out.push(entry.to_string());
            }
        }
        if !done {
            out.insert(0, gpu.to_string());
        }
        format!("--gres={}", out.join(","))
    }

    /// The options `hpc interactive` gives srun, which reads no `#SBATCH`
    /// line: the script's own that srun takes too, the last of each (its
    /// memory option left out where the command line sets memory, as
    /// sbatch leaves it out), then `plan`, the advice, which replaces the
    /// script's option of the same kind. The command line's options follow
    /// on srun's line and win as they do with sbatch. Beside them, the
    /// script's task layout, left out: one shell is one task.
    pub fn srun_options(&self, plan: &[String]) -> (Vec<String>, &[String]) {
        let slot = |o: &str| -> String {
            let name = o.trim_start_matches('-').split('=').next().unwrap_or("");
            match name {
                "mem" | "mem-per-cpu" | "mem-per-gpu" => "mem".into(),
                _ => name.into(),
            }
        };
        let mut taken: Vec<String> = plan.iter().map(|o| slot(o)).collect();
        if self.from_cli.contains(&"mem") {
            taken.push("mem".into());
        }
        let mut out = Vec::new();
        for (s, word) in self.raw.carried.iter().rev() {
            if !taken.iter().any(|t| t == s) {
                taken.push(s.to_string());
                out.push(word.clone());
            }
        }
        out.reverse();
        out.extend(plan.iter().cloned());
        (out, &self.raw.layout)
    }

    /// The GPU option the job uses, and the type.
    pub fn gpu_scope(&self) -> Option<Scope> {
        let r = &self.raw;
        [
            ("--gpus", &r.gpus),
            ("--gpus-per-node", &r.gpus_per_node),
            ("--gpus-per-task", &r.gpus_per_task),
            ("--gres", &r.gres),
        ]
        .into_iter()
        .find_map(|(name, g)| g.as_ref().map(|g| Scope::Gpus(name, g.kind.clone())))
    }
}

/// A directive that could not be read: the line (1-based) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectiveError {
    /// The line of the script, counting from 1.
    pub line: usize,
    /// What was wrong, naming the option and its value.
    pub reason: String,
}

/// Reads the `#SBATCH` directives of `text` into a [`Request`] with whole-job
/// totals: memory is `--mem` x nodes, `--mem-per-cpu` x CPUs or
/// `--mem-per-gpu` x GPUs; CPUs are `--cpus-per-task` x tasks; GPUs are
/// `--gpus`, `--gpus-per-node` x nodes, `--gpus-per-task` x tasks or the
/// `gpu` entry of `--gres` x nodes.
pub fn parse_directives(text: &str) -> Result<Request, DirectiveError> {
    Directives::read(text).map(|d| d.request())
}

/// True for a line sbatch stops at: neither blank nor a comment. Only C's
/// `isspace` characters are skipped before the `#`, as sbatch skips them: a
/// line indented with a no-break space is a command.
pub fn is_command(line: &str) -> bool {
    line.trim_start_matches([' ', '\t', '\r', '\n', '\x0b', '\x0c'])
        .chars()
        .next()
        .is_some_and(|c| c != '#')
}

/// Splits a directive's text into words as sbatch does.
fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\\') => {
                if let Some(n) = chars.next() {
                    cur.get_or_insert_with(String::new).push(n);
                }
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.get_or_insert_with(String::new).push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                cur.get_or_insert_with(String::new);
            }
            (None, '#') => break,
            (None, c) if c.is_whitespace() => words.extend(cur.take()),
            (None, c) => cur.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(cur);
    words
}

/// Applies the options among `words`; unknown options are skipped with the
/// word after them when that word is not itself an option.
fn apply_words(raw: &mut Raw, words: &[String]) -> Result<(), String> {
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "--exclusive" || w.starts_with("--exclusive=") {
            raw.exclusive = true;
        }
        let (key, name, inline) = match find_option(w) {
            Some(found) => found,
            None if srun_also(w).is_some() => {
                let (long, takes, inline) = srun_also(w).unwrap_or_default();
                let word = match (takes, inline) {
                    (false, v) => v.map_or(format!("--{long}"), |v| format!("--{long}={v}")),
                    (true, Some(v)) => format!("--{long}={v}"),
                    (true, None) => {
                        let v = words
                            .get(i)
                            .ok_or_else(|| format!("--{long}: needs a value"))?;
                        i += 1;
                        format!("--{long}={v}")
                    }
                };
                raw.carried.push((long, word));
                continue;
            }
            None => {
                let takes_next = (w.starts_with("--") && !w.contains('='))
                    || (w.len() == 2 && w.starts_with('-'));
                if takes_next && words.get(i).is_some_and(|n| !n.starts_with('-')) {
                    i += 1;
                }
                continue;
            }
        };
        let value = match inline {
            Some(v) => v,
            None => {
                let v = words
                    .get(i)
                    .ok_or_else(|| format!("{name}: needs a value"))?;
                i += 1;
                v.clone()
            }
        };
        set(raw, key, &value).map_err(|e| {
            // hpc-core's parsers name the value already: name it once.
            let quoted = format!("'{}': ", value.trim());
            let e = e.strip_prefix(&quoted).unwrap_or(&e);
            format!("{name} '{value}': {e}")
        })?;
        let long = OPTIONS.iter().find(|o| o.2 == key).map_or("", |o| o.0);
        let word = format!("--{long}={value}");
        if LAYOUT.contains(&key) {
            raw.layout.push(word);
        } else if key != Key::Array {
            let slot = match key {
                Key::Mem | Key::MemPerCpu | Key::MemPerGpu => "mem",
                _ => long,
            };
            raw.carried.push((slot, word));
        }
    }
    Ok(())
}

/// How a word names an option: its long name or its short letter.
enum Named<'a> {
    Long(&'a str),
    Short(char),
}

/// The option a word names and its value when the word holds it
/// (`--mem=4G`, `-c4`); `None` for a word that is no option.
fn named(w: &str) -> Option<(Named<'_>, Option<String>)> {
    if let Some(long) = w.strip_prefix("--") {
        return Some(match long.split_once('=') {
            Some((n, v)) => (Named::Long(n), Some(v.to_string())),
            None => (Named::Long(long), None),
        });
    }
    let mut chars = w.strip_prefix('-')?.chars();
    let letter = chars.next()?;
    let rest: String = chars.collect();
    Some((Named::Short(letter), (!rest.is_empty()).then_some(rest)))
}

/// The option of [`SRUN_ALSO`] a word names: its long name, whether it
/// takes a value, and the value when the word holds it.
fn srun_also(w: &str) -> Option<(&'static str, bool, Option<String>)> {
    let (name, inline) = named(w)?;
    let entry = match name {
        Named::Long(n) => SRUN_ALSO.iter().find(|o| o.0 == n)?,
        Named::Short(l) => SRUN_ALSO.iter().find(|o| o.1 == Some(l))?,
    };
    // A flag's letter with more after it (`-Ox`) is not that flag.
    if !entry.2 && inline.is_some() && matches!(name, Named::Short(_)) {
        return None;
    }
    Some((entry.0, entry.2, inline))
}

/// The option of [`OPTIONS`] a word names, how it was written, and its
/// value when the word holds it (`--mem=4G`, `-c4`).
fn find_option(w: &str) -> Option<(Key, String, Option<String>)> {
    let (name, inline) = named(w)?;
    match name {
        Named::Long(n) => Some((
            OPTIONS.iter().find(|o| o.0 == n)?.2,
            format!("--{n}"),
            inline,
        )),
        Named::Short(l) => Some((
            OPTIONS.iter().find(|o| o.1 == Some(l))?.2,
            format!("-{l}"),
            inline,
        )),
    }
}

/// Stores one option's value.
fn set(raw: &mut Raw, key: Key, v: &str) -> Result<(), String> {
    let r = &mut raw.request;
    match key {
        Key::Mem => raw.mem = Some(MemPer::Node(mem_mb(v)?)),
        Key::MemPerCpu => raw.mem = Some(MemPer::Cpu(mem_mb(v)?)),
        Key::MemPerGpu => raw.mem = Some(MemPer::Gpu(mem_mb(v)?)),
        Key::CpusPerTask => raw.cpus_per_task = Some(count(v)?),
        Key::CpusPerGpu => raw.cpus_per_gpu = Some(count(v)?),
        Key::Ntasks => raw.ntasks = Some(count(v)?),
        Key::NtasksPerNode => raw.ntasks_per_node = Some(count(v)?),
        // `-N 2-4` asks for 2 to 4 nodes: the minimum is what it gets for sure.
        Key::Nodes => raw.nodes = Some(count(v.split('-').next().unwrap_or(v))?),
        Key::Time => raw.time_s = time_limit(v)?,
        Key::Gres => {
            raw.gres = gres_gpus(v)?;
            raw.gres_text = Some(v.to_string());
        }
        Key::Gpus => raw.gpus = Some(gpu_spec(v)?),
        Key::GpusPerNode => raw.gpus_per_node = Some(gpu_spec(v)?),
        Key::GpusPerTask => raw.gpus_per_task = Some(gpu_spec(v)?),
        Key::Array => r.array = Some(text_value(v)?),
        Key::Partition => r.partition = Some(text_value(v)?),
        Key::Account => r.account = Some(text_value(v)?),
        Key::Qos => r.qos = Some(text_value(v)?),
        Key::JobName => r.job_name = Some(text_value(v)?),
    }
    Ok(())
}

/// A memory size in MiB, as sbatch reads it (SLURM's `str_to_mbytes`): a
/// bare number is MiB; whole digits, then
/// nothing or M (MiB), K (KiB, rounded up to a MiB), G or T, either case,
/// optionally followed by B (`4GB`). sbatch refuses a fraction (`1.5G`) and
/// any other unit (`1P`).
fn mem_mb(v: &str) -> Result<f64, String> {
    const HOW: &str = "not a memory size (whole digits and K, M, G or T)";
    let v = v.trim();
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = v[..digits].parse().map_err(|_| HOW.to_string())?;
    let unit = v[digits..]
        .strip_suffix(['b', 'B'])
        .filter(|u| !u.is_empty());
    let mib = match unit.unwrap_or(&v[digits..]) {
        "" | "m" | "M" => Some(n),
        "k" | "K" => Some(n.div_ceil(1024)),
        "g" | "G" => n.checked_mul(1024),
        "t" | "T" => n.checked_mul(1024 * 1024),
        _ => None,
    };
    mib.map(|m| m as f64).ok_or_else(|| HOW.to_string())
}

/// Whether `t` has the shape SLURM takes for a time limit: digits, at
/// most one `-` before any `:`, at most two `:`, and a run of digits for
/// each field the colons (and the dash, with colons) make: `5:`, `:30`,
/// `1-:` and `::` are refused; `2-` (two days) is taken.
fn timespec_shape(t: &str) -> bool {
    let (mut groups, mut dashes, mut colons, mut in_digits) = (0, 0, 0, false);
    for b in t.bytes() {
        match b {
            b'0'..=b'9' => {
                groups += usize::from(!in_digits);
                in_digits = true;
            }
            b'-' if colons == 0 => (dashes, in_digits) = (dashes + 1, false),
            b':' => (colons, in_digits) = (colons + 1, false),
            _ => return false,
        }
    }
    let fields = colons + 1 + usize::from(dashes > 0 && colons > 0);
    groups > 0 && dashes <= 1 && colons <= 2 && (colons == 0 || groups >= fields)
}

/// A time limit as sbatch reads it (SLURM's `time_str2mins`): `minutes`,
/// `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
/// `days-hours:minutes`, `days-hours:minutes:seconds` (`2-` is two days),
/// in whole minutes, seconds rounded up (`1:30` is 2 minutes); `UNLIMITED`,
/// `INFINITE` (any case), `-1` and `0` ask for no limit (`None`). A
/// fraction, a word or a field without digits is refused, as sbatch
/// refuses it (see `timespec_shape`).
fn time_limit(v: &str) -> Result<Option<f64>, String> {
    const HOW: &str = "not a time limit (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED)";
    let t = v.trim();
    if ["-1", "infinite", "unlimited"]
        .iter()
        .any(|w| t.eq_ignore_ascii_case(w))
    {
        return Ok(None);
    }
    if !timespec_shape(t) {
        return Err(HOW.into());
    }
    let num = |f: &str| -> Option<u64> {
        if f.is_empty() {
            Some(0)
        } else {
            f.parse().ok()
        }
    };
    let fields = |text: &str| -> Option<Vec<u64>> {
        let f: Vec<&str> = text.split(':').collect();
        (f.len() <= 3).then_some(())?;
        f.into_iter().map(num).collect()
    };
    // Days, hours, minutes, seconds (saturating: a huge one is refused
    // below).
    let total = |d: u64, h: u64, m: u64, s: u64| {
        d.saturating_mul(86_400)
            .saturating_add(h.saturating_mul(3600))
            .saturating_add(m.saturating_mul(60))
            .saturating_add(s)
    };
    let secs = match t.split_once('-') {
        Some((d, rest)) if !d.is_empty() => match (d.parse().ok(), fields(rest).as_deref()) {
            (Some(d), Some([h])) => Some(total(d, *h, 0, 0)),
            (Some(d), Some([h, m])) => Some(total(d, *h, *m, 0)),
            (Some(d), Some([h, m, s])) => Some(total(d, *h, *m, *s)),
            _ => None,
        },
        Some(_) => None,
        None => match fields(t).as_deref() {
            Some([m]) => Some(total(0, 0, *m, 0)),
            Some([m, s]) => Some(total(0, 0, *m, *s)),
            Some([h, m, s]) => Some(total(0, *h, *m, *s)),
            _ => None,
        },
    }
    .filter(|s| *s < 100 * 365 * 86_400)
    .ok_or_else(|| HOW.to_string())?;
    Ok((secs > 0).then(|| (secs.div_ceil(60) * 60) as f64))
}

/// A positive count.
fn count(v: &str) -> Result<u32, String> {
    match slurm::parse_count(v)? {
        Some(n @ 1..=0xFFFF_FFFF) => Ok(n as u32),
        _ => Err("not a positive count".into()),
    }
}

/// A text value, which must not be empty.
fn text_value(v: &str) -> Result<String, String> {
    if v.trim().is_empty() {
        Err("empty".into())
    } else {
        Ok(v.to_string())
    }
}

/// `[type:]count` as `--gpus` takes it.
fn gpu_spec(v: &str) -> Result<Gpus, String> {
    let (kind, n) = match v.rsplit_once(':') {
        Some((k, n)) => (Some(k.to_string()), n),
        None => (None, v),
    };
    Ok(Gpus {
        count: count(n)?,
        kind,
    })
}

/// The `gpu` entry of a `--gres` list (`gpu`, `gpu:2`, `gpu:a100:2`, also
/// with a `gres/` prefix); `None` when the list has none.
fn gres_gpus(v: &str) -> Result<Option<Gpus>, String> {
    for entry in v.split(',') {
        let entry = entry.strip_prefix("gres/").unwrap_or(entry);
        // A count may carry a socket binding: `gpu:2(S:0-1)`.
        let entry = entry.split('(').next().unwrap_or(entry);
        let mut parts = entry.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        // A count of 0 (`gpu:0`, `gpu:a100:0`) asks for no GPU; a word that
        // is no number is a type.
        let zero = |n: &str| slurm::parse_count(n) == Ok(Some(0));
        return Ok(Some(match rest.as_slice() {
            [] => Gpus {
                count: 1,
                kind: None,
            },
            [one] | [_, one] if zero(one) => return Ok(None),
            [one] => match count(one) {
                Ok(n) => Gpus {
                    count: n,
                    kind: None,
                },
                Err(_) => Gpus {
                    count: 1,
                    kind: Some(one.to_string()),
                },
            },
            [kind, n] => Gpus {
                count: count(n)?,
                kind: Some(kind.to_string()),
            },
            _ => return Err("not a gpu gres (gpu[:type][:count])".into()),
        }));
    }
    Ok(None)
}

/// The whole-job totals from the values as written.
fn totals(raw: Raw) -> Request {
    let mut r = raw.request;
    r.nodes = raw.nodes;
    let nodes = raw.nodes.unwrap_or(1);
    r.ntasks = raw
        .ntasks
        .or(raw.ntasks_per_node.map(|n| n.saturating_mul(nodes)));
    let tasks = r.ntasks.unwrap_or(1);
    if raw.cpus_per_task.is_some() || r.ntasks.is_some() {
        r.cpus = Some(raw.cpus_per_task.unwrap_or(1).saturating_mul(tasks));
    }
    r.time_s = raw.time_s;
    let cpus_per_gpu = raw.cpus_per_gpu;
    let gpus = [
        raw.gpus.map(|g| (g, 1)),
        raw.gpus_per_node.map(|g| (g, nodes)),
        raw.gpus_per_task.map(|g| (g, tasks)),
        raw.gres.map(|g| (g, nodes)),
    ]
    .into_iter()
    .flatten()
    .next();
    if let Some((g, times)) = gpus {
        r.gpus = Some(g.count.saturating_mul(times));
        r.gpu_type = g.kind;
    }
    // `--cpus-per-gpu` gives the job that many CPUs for each of its GPUs.
    if let (Some(c), Some(g)) = (cpus_per_gpu, r.gpus) {
        r.cpus = Some(c.saturating_mul(g));
    }
    r.mem_mb = match raw.mem {
        // `--mem=0` asks for all the memory of each node: unknown here.
        Some(MemPer::Node(m)) if m > 0.0 => Some(m * f64::from(nodes)),
        Some(MemPer::Cpu(m)) => Some(m * f64::from(r.cpus.unwrap_or(1))),
        Some(MemPer::Gpu(m)) => Some(m * f64::from(r.gpus.unwrap_or(1))),
        _ => None,
    };
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(directives: &str) -> Request {
        parse_directives(directives).unwrap()
    }

    #[test]
    fn words_split_like_sbatch() {
        assert_eq!(
            split_words(r#" --job-name="a b" -p 'x y'  # --mem=1G"#),
            vec!["--job-name=a b", "-p", "x y"]
        );
        assert_eq!(split_words(r"--job-name=a\ b"), vec!["--job-name=a b"]);
        assert_eq!(split_words("--comment=''"), vec!["--comment="]);
    }

    #[test]
    fn short_options_take_joined_or_separate_values() {
        assert_eq!(req("#SBATCH -c4\n").cpus, Some(4));
        assert_eq!(req("#SBATCH -c 4\n").cpus, Some(4));
        assert_eq!(req("#SBATCH -n 3 -c 2\n").cpus, Some(6));
    }

    #[test]
    fn unknown_options_and_their_values_are_skipped() {
        let r = req("#SBATCH --output out.log --exclusive -c 2\n#SBATCH -o x.log\n");
        assert_eq!(r.cpus, Some(2));
        assert_eq!(r.job_name, None);
    }

    #[test]
    fn gres_forms() {
        let g = |s: &str| gres_gpus(s).unwrap().map(|g| (g.count, g.kind));
        assert_eq!(g("gpu"), Some((1, None)));
        assert_eq!(g("gpu:2"), Some((2, None)));
        assert_eq!(g("gpu:a100:2"), Some((2, Some("a100".into()))));
        assert_eq!(g("gpu:a100"), Some((1, Some("a100".into()))));
        assert_eq!(
            g("shard:1,gres/gpu:v100:4(S:0-1)"),
            Some((4, Some("v100".into())))
        );
        assert_eq!(g("shard:1"), None);
        assert!(gres_gpus("gpu:a100:x").is_err());
        // No GPU: `gpu:0` was read as one GPU of type "0".
        assert_eq!(g("gpu:0"), None);
        assert_eq!(g("gpu:a100:0"), None);
    }

    #[test]
    fn a_hetjobs_request_is_its_first_components() {
        // The second component's memory and CPUs were laid over the
        // first's, beside the first's GPUs: a request no component has.
        let d = Directives::read(
            "#!/bin/sh\n#SBATCH --mem=100G -c 16 --gres=gpu:4\n#SBATCH hetjob\n#SBATCH --mem=4G -c 1 -J x\nsrun true\n",
        )
        .unwrap();
        assert!(d.hetjob);
        let r = d.request();
        assert_eq!(
            (r.mem_mb, r.cpus, r.gpus),
            (Some(102_400.0), Some(16), Some(4))
        );
        assert_eq!(r.job_name, None);
        assert_eq!(d.block_end, 4, "the block still ends at the first command");
    }

    #[test]
    fn mem_zero_means_the_whole_node_and_is_left_unknown() {
        assert_eq!(req("#SBATCH --mem=0\n").mem_mb, None);
    }

    #[test]
    fn the_last_memory_option_wins() {
        let r = req("#SBATCH --mem=1G\n#SBATCH --mem-per-cpu=100 -c 3\n");
        assert_eq!(r.mem_mb, Some(300.0));
    }

    #[test]
    fn a_comment_indented_with_a_no_break_space_ends_the_block() {
        // sbatch skips only isspace() before '#': U+00A0 makes the line a
        // command, and the directives after it are not read.
        let d = Directives::read("#!/bin/sh\n\u{a0}# note\n#SBATCH --mem=1G\n").unwrap();
        assert_eq!(d.block_end, 1);
        assert_eq!(d.request().mem_mb, None);
        let d = Directives::read("#!/bin/sh\n \t# note\n#SBATCH --mem=1G\n").unwrap();
        assert_eq!(d.request().mem_mb, Some(1024.0));
    }

    #[test]
    fn a_missing_value_is_an_error_with_its_line() {
        let e = parse_directives("#!/bin/sh\n#SBATCH --mem\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("--mem: needs a value"), "{}", e.reason);
    }

    #[test]
    fn srun_gets_the_scripts_own_options_with_the_advice_over_them() {
        let script = "#!/bin/sh\n#SBATCH --job-name=x -p short -c4 --mem=1G --mem-per-cpu=2G -t 1:00:00\n\
            #SBATCH -C 'gpu&fast' --exclusive -n 4 --nodes=2 --array=1-3 --output=o.txt -wnode1 -O\n\
            #SBATCH --ntasks-per-node=2 --constraint=big --comment='a -x b'\nhostname\n";
        let d = Directives::read(script).unwrap().with_cli(&[]).unwrap();
        let plan = [
            "--mem-per-cpu=1G".to_string(),
            "--time=00:30:00".to_string(),
        ];
        let (srun, layout) = d.srun_options(&plan);
        assert_eq!(
            srun,
            [
                "--job-name=x",
                "--partition=short",
                "--cpus-per-task=4",
                "--exclusive",
                "--nodelist=node1",
                "--overcommit",
                "--constraint=big",
                "--mem-per-cpu=1G",
                "--time=00:30:00"
            ]
        );
        assert_eq!(layout, ["--ntasks=4", "--nodes=2", "--ntasks-per-node=2"]);
        // Without advice the script's own memory and time go as written.
        let (srun, _) = d.srun_options(&[]);
        assert!(srun.contains(&"--mem-per-cpu=2G".to_string()), "{srun:?}");
        assert!(srun.contains(&"--time=1:00:00".to_string()), "{srun:?}");
        assert!(!srun.iter().any(|o| o == "--mem=1G"), "{srun:?}");
    }

    #[test]
    fn srun_leaves_the_scripts_memory_to_the_command_lines() {
        // sbatch drops the script's --mem-per-cpu for the command line's
        // --mem; srun given both refuses them as mutually exclusive.
        let d = Directives::read("#SBATCH --mem-per-cpu=2G -c 2 --gres=gpu:1\n")
            .unwrap()
            .with_cli(&["--mem=8G".to_string()])
            .unwrap();
        let (srun, layout) = d.srun_options(&[]);
        assert_eq!(srun, ["--cpus-per-task=2", "--gres=gpu:1"]);
        assert!(layout.is_empty());
    }
}
