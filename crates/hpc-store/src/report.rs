//! Efficiency reports written out: the table, CSV, NDJSON and Markdown of
//! [`hpc_db::report`]'s rows (jobs, CPU, memory and GPU hours, efficiencies and
//! waste, grouped by user, account, group, partition, node, state or tool).
//!
//! Both back ends (SQLite here, Parquet in the `parquet` module of the
//! `parquet` feature) produce the same [`Partial`] sums per raw key;
//! [`finish`] maps raw keys to report keys (a user to its group, a node list
//! to its nodes) and computes the efficiencies from the sums, so the two
//! give the same table.

use std::io::Write;

use hpc_core::table::{self, Column, Form, Table};
use hpc_core::Result;
pub use hpc_db::report::{
    finish, read_groups, By, Groups, Row, BAD_NODE_KEY, COLUMNS, MAX_JOB_NODES, NONE_KEY,
};
use hpc_db::{JobFilter, Store};
pub use hpc_db::{Partial, RawRow};
use serde_json::{Map, Value};

/// The column of the raw key in the jobs table (and the Parquet files).
pub fn raw_key_column(by: By) -> &'static str {
    by.group_key().column()
}

/// The raw rows from the SQLite store ([`Store::report_partials`]).
pub fn sqlite_rows(store: &Store, by: By, filter: &JobFilter) -> hpc_db::Result<Vec<RawRow>> {
    store.report_partials(by.group_key(), by == By::Group, filter)
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal (80 columns).
    Table,
    /// CSV with a header.
    Csv,
    /// One JSON object a line (`kind: report`).
    Ndjson,
    /// A Markdown table.
    Md,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Format, String> {
        Ok(match s {
            "table" => Format::Table,
            "csv" => Format::Csv,
            "ndjson" => Format::Ndjson,
            "md" => Format::Md,
            _ => return Err(format!("'{s}': not one of table, csv, ndjson, md")),
        })
    }
}

fn fmt_num(col: &str, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if col == "jobs" => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

/// The widest key of the terminal table while its other columns need the
/// room; longer keys are cut in the middle with a `~` (see `cut_key`).
const KEY_WIDTH: usize = 14;

/// The heads of the terminal table (short, for 80 columns), after the key.
const TABLE_HEADS: [&str; 10] = [
    "jobs", "cpu_h", "cpu%", "cpu_w", "mem_gbh", "mem%", "mem_w", "gpu_h", "gpu%", "gpu_w",
];

/// The key's width and the forms of the terminal table's columns: jobs
/// whole, the others with one decimal while the table fits 80 columns; past
/// that, the column that gains most goes to whole numbers, then the next
/// (each column keeps one form: never `5462.4` beside `549449`), and last
/// the key column is narrowed, to no fewer than 8 characters.
fn table_layout(key: &str, cells: &[(String, [Option<f64>; 10])]) -> (usize, [Form; 10]) {
    let mut key_width = cells
        .iter()
        .map(|(k, _)| k.chars().count())
        .fold(key.len(), usize::max)
        .min(KEY_WIDTH);
    let width = |i: usize, form: Form| {
        cells
            .iter()
            .filter_map(|(_, v)| v[i])
            .map(|v| form.format(v).len())
            .fold(TABLE_HEADS[i].len(), usize::max)
    };
    let mut forms = [Form::Fixed(1); 10];
    forms[0] = Form::Int;
    let mut used = key_width + (0..10).map(|i| 1 + width(i, forms[i])).sum::<usize>();
    while used > 80 {
        let best = (1..10)
            .filter(|&i| forms[i] != Form::Int)
            .map(|i| (width(i, forms[i]) - width(i, Form::Int), i))
            .max();
        match best {
            Some((gain, i)) if gain > 0 => {
                forms[i] = Form::Int;
                used -= gain;
            }
            _ => break,
        }
    }
    let floor = key.len().max(8).min(key_width);
    key_width -= used.saturating_sub(80).min(key_width - floor);
    // Room left in 80 columns goes to keys longer than KEY_WIDTH.
    let longest = cells
        .iter()
        .map(|(k, _)| k.chars().count())
        .fold(key.len(), usize::max);
    key_width += longest
        .saturating_sub(key_width)
        .min(80usize.saturating_sub(used));
    (key_width, forms)
}

/// `k` in at most `width` characters: cut in the middle with a `~`, so that
/// keys that differ only at the end (`align_reads_bwa_v1`, `..._v2`) stay
/// apart.
fn cut_key(k: &str, width: usize) -> String {
    let n = k.chars().count();
    if n <= width || width < 3 {
        return k.to_string();
    }
    let tail = (width - 1) / 2;
    let head = width - 1 - tail;
    let mut out: String = k.chars().take(head).collect();
    out.push('~');
    out.extend(k.chars().skip(n - tail));
    out
}

fn md_escape(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    for c in k.chars() {
        match c {
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Writes the report in the chosen format.
pub fn write(out: &mut dyn Write, by: By, rows: &[Row], format: Format) -> Result<()> {
    let key = by.name();
    match format {
        Format::Table => {
            let mut total = Row {
                key: "TOTAL".into(),
                sums: Partial::default(),
            };
            let mut cells: Vec<(String, [Option<f64>; 10])> = Vec::with_capacity(rows.len() + 1);
            for r in rows {
                total.sums.add_scaled(&r.sums, 1.0);
                cells.push((r.key.clone(), r.values()));
            }
            if by != By::Node && rows.len() > 1 {
                cells.push((total.key.clone(), total.values()));
            }
            let (key_width, forms) = table_layout(key, &cells);
            let mut columns = vec![Column::new(key, Form::Text).max_width(key_width)];
            for (head, form) in TABLE_HEADS.iter().zip(forms) {
                columns.push(Column::new(*head, form));
            }
            let mut t = Table::new(columns).gap(1);
            for (k, v) in cells {
                let mut row: Vec<table::Cell> = vec![cut_key(&k, key_width).into()];
                row.extend(v.into_iter().map(table::Cell::from));
                t.row(row);
            }
            t.write(out)?;
        }
        Format::Md => {
            writeln!(out, "| {key} | {} |", COLUMNS.join(" | "))?;
            writeln!(out, "|---|{}", "---:|".repeat(COLUMNS.len()))?;
            for r in rows {
                let cells: Vec<String> = COLUMNS
                    .iter()
                    .zip(r.values())
                    .map(|(c, v)| fmt_num(c, v))
                    .collect();
                writeln!(out, "| {} | {} |", md_escape(&r.key), cells.join(" | "))?;
            }
        }
        Format::Csv | Format::Ndjson => {
            let mut cols = vec![key.to_string()];
            cols.extend(COLUMNS.iter().map(|c| c.to_string()));
            let maps = rows.iter().map(|r| r.record(by)).collect();
            write_records(out, format, &[], &cols, maps)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Writes rows given as JSON objects: as CSV under `cols`, or as NDJSON
/// records that start with `tags` (their `kind` and the like).
fn write_records(
    out: &mut dyn Write,
    format: Format,
    tags: &[(&str, &str)],
    cols: &[String],
    rows: Vec<Map<String, Value>>,
) -> Result<()> {
    if format == Format::Csv {
        return hpc_core::csvio::write_csv(&mut *out, cols, &rows);
    }
    for row in rows {
        let mut m: Map<String, Value> = tags
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
            .collect();
        m.extend(row);
        serde_json::to_writer(&mut *out, &m)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A cell of a generic table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Text (escaped for the format when written).
    Text(String),
    /// A number, written with `places` decimals in tables.
    Num(Option<f64>, usize),
}

/// Writes a generic table (flags, history) in the chosen format. In the
/// terminal table the last column is cut to keep lines within 80 columns.
pub fn write_table(
    out: &mut dyn Write,
    kind: &str,
    cols: &[&str],
    rows: &[Vec<Cell>],
    format: Format,
) -> Result<()> {
    let text = |c: &Cell| match c {
        Cell::Text(t) => t.clone(),
        Cell::Num(None, _) => "-".into(),
        Cell::Num(Some(v), p) => format!("{v:.p$}", p = *p),
    };
    match format {
        Format::Table => {
            // A column's form is that of its numbers (their places), else text.
            let columns = cols
                .iter()
                .enumerate()
                .map(|(i, head)| {
                    let places = rows.iter().find_map(|r| match r.get(i) {
                        Some(Cell::Num(_, p)) => Some(*p),
                        _ => None,
                    });
                    let form = match places {
                        None => Form::Text,
                        Some(0) => Form::Int,
                        Some(p) => Form::Fixed(p),
                    };
                    let col = Column::new(*head, form);
                    if i + 1 < cols.len() {
                        col.max_width(24)
                    } else {
                        col
                    }
                })
                .collect();
            let mut t = Table::new(columns).gap(1).fit(80);
            for r in rows {
                t.row(
                    r.iter()
                        .map(|c| match c {
                            Cell::Text(t) => table::Cell::Text(t.clone()),
                            Cell::Num(v, _) => (*v).into(),
                        })
                        .collect(),
                );
            }
            t.write(out)?;
        }
        Format::Md => {
            writeln!(out, "| {} |", cols.join(" | "))?;
            writeln!(out, "|{}", "---|".repeat(cols.len()))?;
            for r in rows {
                let cells: Vec<String> = r.iter().map(|c| md_escape(&text(c))).collect();
                writeln!(out, "| {} |", cells.join(" | "))?;
            }
        }
        Format::Csv | Format::Ndjson => {
            let maps = rows.iter().map(|r| {
                let mut m = Map::new();
                for (c, v) in cols.iter().zip(r) {
                    let v = match v {
                        Cell::Text(t) => Value::from(t.clone()),
                        Cell::Num(Some(n), 0) if n.fract() == 0.0 => Value::from(*n as i64),
                        Cell::Num(n, _) => n.map_or(Value::Null, Value::from),
                    };
                    m.insert((*c).into(), v);
                }
                m
            });
            let names: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
            write_records(out, format, &[("kind", kind)], &names, maps.collect())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The value at quantile `q` (0..=1) of sorted values, by linear interpolation.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(key: &str, account: &str, jobs: f64, cpu_h: f64) -> RawRow {
        RawRow {
            key: Some(key.into()),
            account: Some(account.into()),
            sums: Partial {
                jobs,
                cpu_h,
                cpu_h_known: cpu_h,
                cpu_used_h: cpu_h / 2.0,
                ..Default::default()
            },
        }
    }

    /// The rows of `raws` by `by`, with no group file.
    fn rows(by: By, raws: Vec<RawRow>) -> Vec<Row> {
        finish(by, raws, &Groups::new()).0
    }

    /// `rows` written in `format`.
    fn rendered(by: By, rows: &[Row], format: Format) -> String {
        let mut out = Vec::new();
        write(&mut out, by, rows, format).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.5), Some(3.0));
        assert_eq!(quantile(&v, 0.9), Some(4.6));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn groups_map_users_and_fall_back_to_the_account() {
        let mut g = Groups::new();
        g.insert("alice".into(), "physics".into());
        let rows = finish(
            By::Group,
            vec![
                raw("alice", "a1", 2.0, 10.0),
                raw("bob", "a2", 1.0, 4.0),
                raw("carol", "a2", 1.0, 2.0),
            ],
            &g,
        )
        .0;
        assert_eq!(rows[0].key, "physics");
        assert_eq!(rows[1].key, "a2");
        assert_eq!(rows[1].sums.jobs, 2.0);
        assert_eq!(rows[1].sums.cpu_h, 6.0);
        assert_eq!(rows[1].cpu_eff(), Some(50.0));
    }

    #[test]
    fn nodes_split_hours_and_count_jobs_each() {
        let rows = rows(
            By::Node,
            vec![raw("n[1-2]", "", 1.0, 10.0), raw("n2", "", 1.0, 1.0)],
        );
        let n2 = rows.iter().find(|r| r.key == "n2").unwrap();
        assert_eq!((n2.sums.jobs, n2.sums.cpu_h), (2.0, 6.0));
        let n1 = rows.iter().find(|r| r.key == "n1").unwrap();
        assert_eq!((n1.sums.jobs, n1.sums.cpu_h), (1.0, 5.0));
    }

    #[test]
    fn table_fits_80_columns_and_escapes_keys() {
        let long = rows(
            By::User,
            vec![
                raw("a-very-long-user-name-indeed", "", 123456.0, 12345678.6),
                raw("x\u{1b}[31m", "", 1.0, 1.0),
            ],
        );
        let text = rendered(By::User, &long, Format::Table);
        for l in text.lines() {
            assert!(l.chars().count() <= 80, "{l:?} is {} wide", l.len());
        }
        assert!(!text.contains('\u{1b}'));
        let piped = rows(By::User, vec![raw("a|b", "", 1.0, 1.0)]);
        assert!(rendered(By::User, &piped, Format::Md).contains("| a\\|b |"));
    }

    #[test]
    fn keys_that_differ_at_the_end_stay_apart() {
        // align_reads_bwa_v1 and _v2 both printed as align_reads_b~ in a
        // table of 72 columns: keys were cut at 14 whatever the room.
        let tools = rows(
            By::Tool,
            vec![
                raw("align_reads_bwa_v1", "", 1.0, 1.0),
                raw("align_reads_bwa_v2", "", 1.0, 1.0),
            ],
        );
        let text = rendered(By::Tool, &tools, Format::Table);
        assert!(
            text.contains("align_reads_bwa_v1 ") && text.contains("align_reads_bwa_v2 "),
            "{text}"
        );
        // Where the numbers leave no room, the cut keeps both ends.
        let wide = rows(
            By::Account,
            ["bio-genomics-lab-a", "bio-genomics-lab-b"]
                .iter()
                .map(|a| raw(a, a, 123_456_789.0, 123_456_789_012.0))
                .collect(),
        );
        let text = rendered(By::Account, &wide, Format::Table);
        let keys: Vec<&str> = text
            .lines()
            .skip(1)
            .take(2)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_ne!(keys[0], keys[1], "{text}");
        assert!(keys.iter().all(|k| k.contains('~')), "{text}");
        assert_eq!(cut_key("abcdefghij", 7), "abc~hij");
    }

    // Issue 23: one number form per column, `_` between thousands.
    #[test]
    fn table_columns_keep_one_form() {
        let both = rows(
            By::User,
            vec![raw("a", "", 1.0, 5462.4), raw("b", "", 2.0, 549_449_000.0)],
        );
        let text = rendered(By::User, &both, Format::Table);
        let cpu_h = |key: &str| {
            let line = text.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_whitespace().nth(2).unwrap().to_owned()
        };
        assert_eq!(cpu_h("a "), "5_462.4", "{text}");
        assert_eq!(cpu_h("b "), "549_449_000.0", "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }
}
