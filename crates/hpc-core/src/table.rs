//! The terminal tables of the tools: aligned columns, one number form per
//! column, one thousands separator, one placeholder for a missing value.
//!
//! - Each [`Column`] has a header and a [`Form`]: [`Form::Text`] cells are
//!   left-aligned; [`Form::Int`], [`Form::Fixed`] and [`Form::Percent`]
//!   cells are right-aligned, and every number of the column is written in
//!   that form (so `5462.4` never stands beside `549449`).
//! - Thousands are separated by `_` ([`THOUSANDS`]), in integers and in the
//!   integer part of decimals alike: `549_449`, `5_462.4`. `_` is read as a
//!   decimal mark nowhere (a `,` is one in much of Europe), and keeps a cell
//!   one word for `awk` or `split_whitespace`.
//! - A missing value ([`Cell::Missing`], an absent `Option`, NaN or an
//!   infinity) is written as `-` ([`MISSING`]).
//! - A text cell in a number column (`unlimited`) is written as it is,
//!   right-aligned with the numbers.
//! - Control characters in text become `?`, so a key cannot move the
//!   terminal's cursor; a column may cap its width ([`Column::max_width`]),
//!   cutting longer text with a `~` at the end (numbers are never cut).
//! - Columns are separated by two spaces ([`Table::gap`] sets another
//!   number); no line ends in spaces.
//!
//! ```
//! use hpc_core::table::{Column, Form, Table};
//!
//! let mut t = Table::new(vec![
//!     Column::new("user", Form::Text),
//!     Column::new("jobs", Form::Int),
//!     Column::new("cpu_h", Form::Fixed(1)),
//!     Column::new("eff%", Form::Percent(1)),
//! ]);
//! t.row(vec!["alice".into(), 549_449u64.into(), 5462.4.into(), Some(0.5).into()]);
//! t.row(vec!["bob".into(), 7u64.into(), 12.0.into(), None::<f64>.into()]);
//! assert_eq!(
//!     t.to_string(),
//!     "user      jobs    cpu_h  eff%\n\
//!      alice  549_449  5_462.4  50.0\n\
//!      bob          7     12.0     -\n"
//! );
//! ```

use std::fmt;
use std::io::{self, Write};

/// The thousands separator of every number in a table.
pub const THOUSANDS: char = '_';

/// What a missing value is written as.
pub const MISSING: &str = "-";

/// How a column writes its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Text, left-aligned. A number in a text column is written as Rust
    /// writes it (`2.5`, `3`), without separators.
    Text,
    /// A whole number, rounded: `549_449`.
    Int,
    /// A number with this many decimals: `5_462.4` for `Fixed(1)`.
    Fixed(usize),
    /// A fraction written as a percentage with this many decimals: `0.053`
    /// is `5.3` for `Percent(1)`. The cell has no `%` sign: the header
    /// carries it (`risk%`).
    Percent(usize),
}

impl Form {
    /// True for the forms of numbers (right-aligned).
    pub fn is_number(self) -> bool {
        self != Form::Text
    }

    /// `v` written in this form, with the separators; [`MISSING`] for NaN
    /// and the infinities. A value that rounds to zero has no sign (`0.0`,
    /// not `-0.0`).
    pub fn format(self, v: f64) -> String {
        if !v.is_finite() {
            return MISSING.into();
        }
        let plain = match self {
            Form::Text => return format!("{v}"),
            Form::Int => format!("{v:.0}"),
            Form::Fixed(p) => format!("{v:.p$}"),
            Form::Percent(p) => format!("{:.p$}", v * 100.0),
        };
        group(&plain)
    }
}

/// `-1234567.89` as `-1_234_567.89`; a negative zero loses its sign.
fn group(plain: &str) -> String {
    let (sign, rest) = match plain.strip_prefix('-') {
        Some(r) if r.bytes().any(|b| (b'1'..=b'9').contains(&b)) => ("-", r),
        Some(r) => ("", r),
        None => ("", plain),
    };
    let (int, frac) = rest.split_at(rest.find('.').unwrap_or(rest.len()));
    let mut out = String::with_capacity(plain.len() + int.len() / 3 + 1);
    out.push_str(sign);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(THOUSANDS);
        }
        out.push(c);
    }
    out.push_str(frac);
    out
}

/// One cell of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Text, written as it is (control characters become `?`).
    Text(String),
    /// A number, written in its column's [`Form`].
    Num(f64),
    /// No value: written as [`MISSING`].
    Missing,
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_owned())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Self {
        Cell::Num(v)
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::Num(v as f64)
    }
}

impl From<usize> for Cell {
    fn from(v: usize) -> Self {
        Cell::Num(v as f64)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Self {
        v.map_or(Cell::Missing, Into::into)
    }
}

/// A column: its header, its form and an optional cap on its width.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    header: String,
    form: Form,
    max_width: Option<usize>,
}

impl Column {
    /// A column with this header and form.
    pub fn new(header: impl Into<String>, form: Form) -> Self {
        Column {
            header: header.into(),
            form,
            max_width: None,
        }
    }

    /// Caps the column at `width` characters (at least 1): longer text,
    /// the header included, is cut to `width - 1` characters and a `~`.
    pub fn max_width(mut self, width: usize) -> Self {
        self.max_width = Some(width.max(1));
        self
    }

    /// The column's form.
    pub fn form(&self) -> Form {
        self.form
    }
}

/// A table: columns, then rows of cells, written aligned.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<Cell>>,
    gap: usize,
    fit: Option<usize>,
}

impl Table {
    /// An empty table with these columns.
    pub fn new(columns: Vec<Column>) -> Self {
        Table {
            columns,
            rows: Vec::new(),
            gap: 2,
            fit: None,
        }
    }

    /// Sets the spaces between columns (2 by default).
    pub fn gap(mut self, spaces: usize) -> Self {
        self.gap = spaces;
        self
    }

    /// Keeps lines within `width` characters by cutting a last text column
    /// (to no fewer than 8 characters); other columns are never cut for it.
    pub fn fit(mut self, width: usize) -> Self {
        self.fit = Some(width);
        self
    }

    /// Adds a row. Cells past the last column are ignored; a short row is
    /// completed with missing values.
    pub fn row(&mut self, mut cells: Vec<Cell>) {
        cells.resize(self.columns.len(), Cell::Missing);
        self.rows.push(cells);
    }

    /// How many rows there are.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The text of every cell, header first, cut to the column caps.
    fn texts(&self) -> Vec<Vec<String>> {
        let mut lines = Vec::with_capacity(self.rows.len() + 1);
        lines.push(
            self.columns
                .iter()
                .map(|c| clean(&c.header, c.max_width))
                .collect::<Vec<_>>(),
        );
        for row in &self.rows {
            lines.push(
                row.iter()
                    .zip(&self.columns)
                    .map(|(cell, col)| match cell {
                        Cell::Text(t) => clean(t, col.max_width),
                        Cell::Num(v) => col.form.format(*v),
                        Cell::Missing => MISSING.into(),
                    })
                    .collect(),
            );
        }
        lines
    }

    /// Writes the header and the rows, one line each.
    pub fn write<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        let mut texts = self.texts();
        let n = self.columns.len();
        let mut widths = vec![0usize; n];
        for line in &texts {
            for (w, t) in widths.iter_mut().zip(line) {
                *w = (*w).max(t.chars().count());
            }
        }
        if let (Some(max), Some(last)) = (self.fit, self.columns.last()) {
            if !last.form.is_number() {
                let used: usize = widths[..n - 1].iter().map(|w| w + self.gap).sum();
                let room = max.saturating_sub(used).max(8);
                if widths[n - 1] > room {
                    widths[n - 1] = room;
                    for line in &mut texts {
                        line[n - 1] = cut(&line[n - 1], room);
                    }
                }
            }
        }
        let gap = " ".repeat(self.gap);
        let mut buf = String::new();
        for line in &texts {
            buf.clear();
            for (i, ((t, w), col)) in line.iter().zip(&widths).zip(&self.columns).enumerate() {
                if i > 0 {
                    buf.push_str(&gap);
                }
                let pad = w.saturating_sub(t.chars().count());
                if col.form.is_number() {
                    buf.push_str(&" ".repeat(pad));
                    buf.push_str(t);
                } else {
                    buf.push_str(t);
                    buf.push_str(&" ".repeat(pad));
                }
            }
            writeln!(out, "{}", buf.trim_end())?;
        }
        Ok(())
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Vec::new();
        self.write(&mut buf).map_err(|_| fmt::Error)?;
        f.write_str(&String::from_utf8_lossy(&buf))
    }
}

/// Text safe for a terminal (control characters as `?`), cut to `max`.
fn clean(t: &str, max: Option<usize>) -> String {
    let clean: String = t
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    match max {
        Some(w) => cut(&clean, w),
        None => clean,
    }
}

/// `t` cut to `width` characters, the last one a `~`, when longer.
fn cut(t: &str, width: usize) -> String {
    if t.chars().count() <= width {
        return t.to_owned();
    }
    let mut s: String = t.chars().take(width.saturating_sub(1)).collect();
    s.push('~');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(t: &Table) -> Vec<String> {
        t.to_string().lines().map(str::to_owned).collect()
    }

    #[test]
    fn text_is_left_aligned_and_numbers_right_aligned() {
        let mut t = Table::new(vec![
            Column::new("name", Form::Text),
            Column::new("n", Form::Int),
        ]);
        t.row(vec!["a".into(), 5u64.into()]);
        t.row(vec!["long name".into(), 1234u64.into()]);
        assert_eq!(
            lines(&t),
            ["name           n", "a              5", "long name  1_234"]
        );
    }

    #[test]
    fn every_cell_of_a_column_takes_its_form() {
        let mut t = Table::new(vec![
            Column::new("int", Form::Int),
            Column::new("fix", Form::Fixed(1)),
            Column::new("pct", Form::Percent(2)),
        ]);
        t.row(vec![549_449.0.into(), 549_449.0.into(), 0.05.into()]);
        t.row(vec![5462.4.into(), 5462.4.into(), 1.0.into()]);
        t.row(vec![0.4.into(), 2.26.into(), 0.123_456.into()]);
        assert_eq!(
            lines(&t),
            [
                "    int        fix     pct",
                "549_449  549_449.0    5.00",
                "  5_462    5_462.4  100.00",
                "      0        2.3   12.35",
            ]
        );
    }

    #[test]
    fn thousands_are_separated_alike_in_integers_and_decimals() {
        assert_eq!(Form::Int.format(1_234_567.0), "1_234_567");
        assert_eq!(Form::Int.format(999.0), "999");
        assert_eq!(Form::Int.format(1000.0), "1_000");
        assert_eq!(Form::Fixed(2).format(-1_234_567.891), "-1_234_567.89");
        assert_eq!(Form::Fixed(1).format(123_456.0), "123_456.0");
        assert_eq!(Form::Percent(1).format(12.5), "1_250.0");
        assert_eq!(Form::Fixed(1).format(-0.04), "0.0");
        assert_eq!(Form::Int.format(-0.4), "0");
        assert_eq!(Form::Int.format(-1000.0), "-1_000");
        assert_eq!(Form::Text.format(2.5), "2.5");
    }

    #[test]
    fn missing_values_are_a_dash() {
        let mut t = Table::new(vec![
            Column::new("k", Form::Text),
            Column::new("v", Form::Fixed(1)),
        ]);
        t.row(vec![Cell::Missing, None::<f64>.into()]);
        t.row(vec!["x".into(), f64::NAN.into()]);
        t.row(vec!["y".into(), f64::INFINITY.into()]);
        t.row(vec!["z".into()]);
        assert_eq!(lines(&t), ["k  v", "-  -", "x  -", "y  -", "z  -"]);
    }

    #[test]
    fn a_header_wider_than_its_cells_sets_the_width() {
        let mut t = Table::new(vec![
            Column::new("a_long_header", Form::Text),
            Column::new("another_header", Form::Int),
        ]);
        t.row(vec!["x".into(), 7u64.into()]);
        assert_eq!(
            lines(&t),
            [
                "a_long_header  another_header",
                "x                           7"
            ]
        );
    }

    #[test]
    fn text_in_a_number_column_is_right_aligned() {
        let mut t = Table::new(vec![Column::new("slots", Form::Int)]);
        t.row(vec!["unlimited".into()]);
        t.row(vec![3u64.into()]);
        assert_eq!(lines(&t), ["    slots", "unlimited", "        3"]);
    }

    #[test]
    fn caps_cut_text_and_control_characters_are_replaced() {
        let mut t = Table::new(vec![
            Column::new("key", Form::Text).max_width(5),
            Column::new("n", Form::Int).max_width(2),
        ])
        .gap(1);
        t.row(vec!["abcdefgh".into(), 123_456u64.into()]);
        t.row(vec!["x\u{1b}[1m".into(), 1u64.into()]);
        assert_eq!(
            lines(&t),
            ["key         n", "abcd~ 123_456", "x?[1m       1"]
        );
    }

    #[test]
    fn fit_cuts_the_last_text_column_only() {
        let mut t = Table::new(vec![
            Column::new("n", Form::Int),
            Column::new("reason", Form::Text),
        ])
        .gap(1)
        .fit(11);
        t.row(vec![1u64.into(), "a reason that is long".into()]);
        assert_eq!(lines(&t), ["n reason", "1 a reason~"]);
        // Never below 8 characters.
        let mut t = Table::new(vec![
            Column::new("n", Form::Int),
            Column::new("reason", Form::Text),
        ])
        .fit(4);
        t.row(vec![1u64.into(), "a reason that is long".into()]);
        assert_eq!(lines(&t)[1], "1  a reaso~");
    }

    #[test]
    fn no_line_ends_in_spaces_and_an_empty_table_has_its_header() {
        let mut t = Table::new(vec![
            Column::new("a", Form::Int),
            Column::new("b", Form::Text),
        ]);
        assert!(t.is_empty());
        assert_eq!(t.to_string(), "a  b\n");
        t.row(vec![1u64.into(), "".into()]);
        assert_eq!(t.len(), 1);
        assert_eq!(t.to_string(), "a  b\n1\n");
    }
}
