//! A fast path for the common sample line: a flat JSON object of numbers and
//! plain strings. Anything else (escapes, nested values, odd types) makes it
//! give up, and the line goes through serde_json instead, which either
//! reads it or reports why not. Both paths fill the same values.

use crate::bins::{FIELDS, NF};

/// A flat line, read without allocating.
pub(crate) struct FastLine<'a> {
    pub kind: Option<&'a str>,
    pub t: Option<f64>,
    pub host: Option<&'a str>,
    pub job_id: Option<&'a str>,
    pub values: [f64; NF],
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Parses a JSON number. Plain decimals of up to 15 digits are computed
/// exactly (an integer over a power of ten, both exact doubles, so the one
/// division rounds correctly); others go to the standard parser.
fn number(s: &[u8]) -> Option<f64> {
    let (neg, d) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let mut i = 0;
    let mut m: u64 = 0;
    while i < d.len() && d[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add(u64::from(d[i] - b'0'));
        i += 1;
    }
    let int_digits = i;
    let mut frac = 0;
    if i < d.len() && d[i] == b'.' {
        i += 1;
        let from = i;
        while i < d.len() && d[i].is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add(u64::from(d[i] - b'0'));
            i += 1;
        }
        frac = i - from;
        if frac == 0 {
            return None;
        }
    }
    if i == d.len() && int_digits > 0 && int_digits + frac <= 15 {
        let v = m as f64 / POW10[frac];
        return Some(if neg { -v } else { v });
    }
    // Validate the JSON number grammar loosely; std parses the rest.
    let text = std::str::from_utf8(s).ok()?;
    let bad = text.starts_with('+')
        || text.starts_with('.')
        || text.starts_with("-.")
        || text.ends_with('.')
        || text.contains(".e")
        || text.contains(".E")
        || text.contains("inf")
        || text.contains("nan");
    if bad {
        return None;
    }
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn is_number_char(c: u8) -> bool {
    matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
}

/// Reads the number that starts at `b[start]` in one pass when it is a
/// plain decimal of up to 15 digits; returns it and where it ends.
fn number_at(b: &[u8], start: usize) -> Option<(f64, usize)> {
    let mut i = start;
    let neg = b.get(i) == Some(&b'-');
    if neg {
        i += 1;
    }
    let from = i;
    let mut m: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
        i += 1;
    }
    let int_digits = i - from;
    let mut frac = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f0 = i;
        while i < b.len() && b[i].is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
            i += 1;
        }
        frac = i - f0;
    }
    let done = i >= b.len() || !is_number_char(b[i]);
    if done && int_digits > 0 && (1..=15).contains(&(int_digits + frac)) && b[i - 1] != b'.' {
        let v = m as f64 / POW10[frac];
        return Some((if neg { -v } else { v }, i));
    }
    let mut j = start;
    while j < b.len() && is_number_char(b[j]) {
        j += 1;
    }
    number(&b[start..j]).map(|v| (v, j))
}

/// The index in `FIELDS` of a key.
fn field_index(key: &[u8]) -> Option<usize> {
    FIELDS.iter().position(|f| f.name.as_bytes() == key)
}

/// Remembers which field the key at each position of the previous line was:
/// lines of one file put their keys in the same order, so most keys cost one
/// comparison instead of a search.
#[derive(Default)]
pub(crate) struct KeyCache {
    slots: Vec<(Box<[u8]>, Option<usize>)>,
}

impl KeyCache {
    fn lookup(&mut self, pos: usize, key: &[u8]) -> Option<usize> {
        if let Some((k, f)) = self.slots.get(pos) {
            if **k == *key {
                return *f;
            }
        }
        let f = field_index(key);
        if pos < 64 {
            if self.slots.len() <= pos {
                self.slots.resize(pos + 1, (Box::default(), None));
            }
            self.slots[pos] = (key.into(), f);
        }
        f
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// A plain string starting after its opening quote: its end (the closing
/// quote's index), or `None` when it holds an escape.
fn plain_string(b: &[u8], i: usize) -> Option<usize> {
    let rest = &b[i..];
    let end = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
    (rest[end] == b'"').then_some(i + end)
}

/// Reads a flat object; `None` sends the line to serde_json.
pub(crate) fn parse<'a>(line: &'a str, cache: &mut KeyCache) -> Option<FastLine<'a>> {
    let b = line.as_bytes();
    let mut out = FastLine {
        kind: None,
        t: None,
        host: None,
        job_id: None,
        values: [f64::NAN; NF],
    };
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (skip_ws(b, i + 1) == b.len()).then_some(out);
    }
    let mut pos = 0usize;
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        pos += 1;
        let kend = plain_string(b, i + 1)?;
        let key = &b[i + 1..kend];
        i = skip_ws(b, kend + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        match *b.get(i)? {
            b'"' => {
                let vend = plain_string(b, i + 1)?;
                // Valid UTF-8 already: slicing at ASCII quotes keeps it so.
                let v = &line[i + 1..vend];
                match key {
                    b"kind" => out.kind = Some(v),
                    b"host" => out.host = Some(v),
                    b"job_id" => out.job_id = Some(v),
                    b"t" => return None,
                    k if field_index(k).is_some() => return None,
                    _ => {}
                }
                i = vend + 1;
            }
            b'-' | b'0'..=b'9' => {
                let (v, end) = number_at(b, i)?;
                i = end;
                match key {
                    b"t" => out.t = Some(v),
                    b"kind" | b"host" | b"job_id" => return None,
                    k => {
                        if let Some(f) = cache.lookup(pos, k) {
                            out.values[f] = v;
                        }
                    }
                }
            }
            b'n' if b[i..].starts_with(b"null") => {
                // Absent, as in serde's Option.
                if key == b"t" || key == b"kind" {
                    return None;
                }
                i += 4;
            }
            b't' if b[i..].starts_with(b"true") => {
                if key == b"t"
                    || field_index(key).is_some()
                    || matches!(key, b"kind" | b"host" | b"job_id")
                {
                    return None;
                }
                i += 4;
            }
            b'f' if b[i..].starts_with(b"false") => {
                if key == b"t"
                    || field_index(key).is_some()
                    || matches!(key, b"kind" | b"host" | b"job_id")
                {
                    return None;
                }
                i += 5;
            }
            _ => return None,
        }
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => {
                return (skip_ws(b, i + 1) == b.len()).then_some(out);
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bins::{values_of, RSS};
    use crate::input::RawSample;

    #[test]
    fn numbers_match_the_standard_parser() {
        for s in [
            "0",
            "1",
            "-1",
            "1700000000.125",
            "0.1",
            "123.456789",
            "1e3",
            "2.5E-3",
            "12345678901234567890",
            "-0.0",
            "0.30000000000000004",
        ] {
            assert_eq!(number(s.as_bytes()), s.parse::<f64>().ok(), "{s}");
        }
        for s in ["-", "1.", ".5", "+1", "1..2", "--1"] {
            assert_eq!(number(s.as_bytes()), None, "{s}");
            assert_eq!(number_at(format!("{s},").as_bytes(), 0), None, "{s}");
        }
        for s in [
            "0",
            "-1",
            "1700000000.125",
            "12.5e2",
            "123456789012345678",
            "1e-7",
        ] {
            let text = format!("{s}}}");
            assert_eq!(
                number_at(text.as_bytes(), 0),
                Some((s.parse().unwrap(), s.len())),
                "{s}"
            );
        }
    }

    #[test]
    fn fast_and_serde_paths_agree() {
        let line = r#"{"kind":"sample","t":1700000001.5,"host":"n1","job_id":"7","rss_mb":12.25,"cpu_cores":3,"extra":true,"note":null,"x":"y","cpi":0.5}"#;
        let f = parse(line, &mut KeyCache::default()).unwrap();
        let raw: RawSample = serde_json::from_str(line).unwrap();
        assert_eq!(f.kind, Some("sample"));
        assert_eq!(f.t, raw.t);
        assert_eq!(f.host, Some("n1"));
        assert_eq!(f.job_id, Some("7"));
        let a = values_of(&raw);
        for (k, (x, y)) in a.iter().zip(&f.values).enumerate() {
            assert!(x == y || (x.is_nan() && y.is_nan()), "{k}");
        }
        assert_eq!(f.values[RSS], 12.25);
    }

    #[test]
    fn the_key_cache_follows_a_change_of_key_order() {
        let mut cache = KeyCache::default();
        let a = parse(r#"{"kind":"sample","t":1,"rss_mb":5,"cpi":2}"#, &mut cache).unwrap();
        let b = parse(r#"{"kind":"sample","t":1,"cpi":7,"rss_mb":9}"#, &mut cache).unwrap();
        assert_eq!((a.values[RSS], a.values[crate::bins::CPI]), (5.0, 2.0));
        assert_eq!((b.values[RSS], b.values[crate::bins::CPI]), (9.0, 7.0));
    }

    #[test]
    fn unusual_lines_go_to_serde() {
        for l in [
            r#"{"kind":"sample","host":"a\"b","t":1}"#,
            r#"{"kind":"sample","t":1,"nested":{"a":1}}"#,
            r#"{"kind":"sample","t":"1"}"#,
            r#"{"kind":"sample","t":1"#,
            r#"{"kind":"sample","t":1} x"#,
            r#"{"kind":"sample","rss_mb":"5","t":1}"#,
            "not json",
        ] {
            assert!(parse(l, &mut KeyCache::default()).is_none(), "{l}");
        }
        assert!(parse(" { } ", &mut KeyCache::default()).is_some());
    }
}
