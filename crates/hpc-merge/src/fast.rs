//! A fast path for the common sample line: a flat JSON object of numbers and
//! plain strings. Anything else (escapes, nested values, odd types) makes it
//! give up, and the line goes through serde_json instead, which either
//! reads it or reports why not. Both paths fill the same values.

use crate::fields::{FIELDS, NF};

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

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The 8 bytes of `b` from `i` as a little-endian word, padded with zero
/// bytes past the end of `b`.
#[inline(always)]
fn load8(b: &[u8], i: usize) -> u64 {
    match b.get(i..i + 8) {
        Some(s) => u64::from_le_bytes(s.try_into().unwrap_or([0; 8])),
        None => {
            let mut a = [0u8; 8];
            let rest = b.get(i..).unwrap_or(&[]);
            a[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(a)
        }
    }
}

/// Reads a run of digits from `b[i]`: the run's end and `m` extended by its
/// digits (wrapping; callers cap the digit count). A plain loop: the digit
/// counts of one file's lines repeat, so its branches predict well, which
/// measured faster than reading eight digits at a time.
#[inline(always)]
fn digits(b: &[u8], mut i: usize, mut m: u64) -> (usize, u64) {
    while i < b.len() && b[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
        i += 1;
    }
    (i, m)
}

/// Reads the number that starts at `b[start]` in one pass when it is a
/// plain decimal of up to 15 digits; returns it and where it ends.
#[inline(always)]
fn number_at(b: &[u8], start: usize) -> Option<(f64, usize)> {
    let mut i = start;
    let neg = b.get(i) == Some(&b'-');
    if neg {
        i += 1;
    }
    let from = i;
    let (e, mut m) = digits(b, i, 0);
    i = e;
    let int_digits = i - from;
    let mut frac = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f0 = i;
        (i, m) = digits(b, i, m);
        frac = i - f0;
    }
    let done = i >= b.len() || !is_number_char(b[i]);
    if done && int_digits > 0 && (1..=15).contains(&(int_digits + frac)) && b[i - 1] != b'.' {
        // Below 2^53: the signed conversion is exact and one instruction.
        let v = m as i64 as f64 / POW10[frac];
        return Some((if neg { -v } else { v }, i));
    }
    number_rest(b, start)
}

/// The rest of [`number_at`]: the number's extent, then [`number`].
#[cold]
#[inline(never)]
fn number_rest(b: &[u8], start: usize) -> Option<(f64, usize)> {
    let mut j = start;
    while j < b.len() && is_number_char(b[j]) {
        j += 1;
    }
    number(&b[start..j]).map(|v| (v, j))
}

/// What a key names: a field of `FIELDS` (its index), one of the keys
/// below, or nothing hpc-merge reads.
const K_T: u8 = NF as u8;
const K_KIND: u8 = NF as u8 + 1;
const K_HOST: u8 = NF as u8 + 2;
const K_JOB: u8 = NF as u8 + 3;
const K_OTHER: u8 = u8::MAX;

/// The ids of the keys read, by the length of the key (`K_OTHER` ends a
/// row); built at compile time, which also checks that the rows suffice.
const fn key_table() -> [[u8; 8]; 24] {
    let mut t = [[K_OTHER; 8]; 24];
    let mut i = 0;
    while i < NF + 4 {
        let len = if i < NF {
            FIELDS[i].name.len()
        } else if i == K_T as usize {
            1
        } else if i == K_JOB as usize {
            6
        } else {
            4
        };
        let mut j = 0;
        while t[len][j] != K_OTHER {
            j += 1;
        }
        t[len][j] = i as u8;
        i += 1;
    }
    t
}
const KEYS_BY_LEN: [[u8; 8]; 24] = key_table();

fn key_name(id: u8) -> &'static [u8] {
    match id {
        K_T => b"t",
        K_KIND => b"kind",
        K_HOST => b"host",
        K_JOB => b"job_id",
        f => FIELDS[f as usize].name.as_bytes(),
    }
}

/// The id of a key (see `K_T`), among the candidates of its length.
#[inline(always)]
fn key_id(key: &[u8]) -> u8 {
    let Some(row) = KEYS_BY_LEN.get(key.len()) else {
        return K_OTHER;
    };
    for &id in row {
        if id == K_OTHER {
            break;
        }
        if key_name(id) == key {
            return id;
        }
    }
    K_OTHER
}

/// The first 16 bytes of the key at `b[at..at + len]`, as two words with
/// the bytes past the key cleared.
#[inline(always)]
fn key_words(b: &[u8], at: usize, len: usize) -> [u64; 2] {
    let mask = |n: usize| match n {
        0 => 0,
        1..=7 => (1u64 << (8 * n)) - 1,
        _ => u64::MAX,
    };
    [
        load8(b, at) & mask(len),
        load8(b, at + 8) & mask(len.saturating_sub(8)),
    ]
}

/// Remembers which field the key at each position of the previous line was:
/// lines of one file put their keys in the same order, so most keys cost one
/// comparison (of two words) instead of a search.
#[derive(Default)]
pub(crate) struct KeyCache {
    slots: Vec<KeySlot>,
}

#[derive(Clone)]
struct KeySlot {
    len: usize,
    words: [u64; 2],
    /// The whole key, for keys longer than the words.
    long: Box<[u8]>,
    id: u8,
}

impl Default for KeySlot {
    fn default() -> Self {
        KeySlot {
            len: 0,
            words: [0; 2],
            long: Box::default(),
            id: K_OTHER,
        }
    }
}

impl KeyCache {
    /// When the key starting at `b[at]` (after its opening quote) is the
    /// short key seen at this position of the previous line: its id and
    /// its closing quote. The cached key holds no quote, backslash or
    /// non-ASCII byte, so matching its bytes and the quote after them is
    /// the same as scanning for the end.
    #[inline(always)]
    fn hit(&self, pos: usize, b: &[u8], at: usize) -> Option<(u8, usize)> {
        let s = self.slots.get(pos)?;
        let end = at + s.len;
        (s.len <= 16 && b.get(end) == Some(&b'"') && key_words(b, at, s.len) == s.words)
            .then_some((s.id, end))
    }

    /// The id of the key `b[at..end]`, the `pos`-th of its line.
    #[inline(always)]
    fn lookup(&mut self, pos: usize, b: &[u8], at: usize, end: usize) -> u8 {
        let len = end - at;
        let words = key_words(b, at, len);
        if let Some(s) = self.slots.get(pos) {
            if s.len == len && s.words == words && (len <= 16 || *s.long == b[at..end]) {
                return s.id;
            }
        }
        self.miss(pos, &b[at..end], words)
    }

    #[cold]
    #[inline(never)]
    fn miss(&mut self, pos: usize, key: &[u8], words: [u64; 2]) -> u8 {
        let id = key_id(key);
        // Only ASCII keys are kept, for `hit`.
        if pos < 64 && key.is_ascii() {
            if self.slots.len() <= pos {
                self.slots.resize(pos + 1, KeySlot::default());
            }
            self.slots[pos] = KeySlot {
                len: key.len(),
                words,
                long: if key.len() > 16 {
                    key.into()
                } else {
                    Box::default()
                },
                id,
            };
        }
        id
    }
}

/// Bytes that may be skipped between JSON tokens.
#[inline(always)]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// A plain string starting after its opening quote: its end (the closing
/// quote's index), or `None` when it holds an escape (or, with `ASCII`, a
/// byte that is not ASCII). Eight bytes at a time.
#[inline(always)]
fn plain_string<const ASCII: bool>(b: &[u8], mut i: usize) -> Option<usize> {
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    loop {
        if i >= b.len() {
            return None;
        }
        let w = load8(b, i);
        let mut hit =
            has_zero(w ^ (ONES * u64::from(b'"'))) | has_zero(w ^ (ONES * u64::from(b'\\')));
        if ASCII {
            hit |= w & HIGHS;
        }
        if hit != 0 {
            let at = i + (hit.trailing_zeros() / 8) as usize;
            // Zero padding past the end matches nothing but itself.
            return (at < b.len() && b[at] == b'"').then_some(at);
        }
        i += 8;
    }
}

/// A flat line as bytes: `kind`, `host` and `job_id` are plain strings.
pub(crate) struct FastBytes<'a> {
    pub kind: Option<&'a [u8]>,
    pub t: Option<f64>,
    pub host: Option<&'a [u8]>,
    pub job_id: Option<&'a [u8]>,
    pub values: [f64; NF],
}

/// Reads a flat object; `None` sends the line to serde_json.
pub(crate) fn parse<'a>(line: &'a str, cache: &mut KeyCache) -> Option<FastLine<'a>> {
    let mut f = FastBytes::new();
    if !parse_into::<false>(line.as_bytes(), cache, &mut f) {
        return None;
    }
    // The strings lie between ASCII quotes of a `str`: whole characters.
    let s = |v: Option<&[u8]>| -> Option<Option<&'a str>> {
        match v {
            None => Some(None),
            Some(v) => {
                let at = v.as_ptr() as usize - line.as_ptr() as usize;
                line.get(at..at + v.len()).map(Some)
            }
        }
    };
    Some(FastLine {
        kind: s(f.kind)?,
        t: f.t,
        host: s(f.host)?,
        job_id: s(f.job_id)?,
        values: f.values,
    })
}

impl FastBytes<'_> {
    pub(crate) fn new() -> Self {
        FastBytes {
            kind: None,
            t: None,
            host: None,
            job_id: None,
            values: [f64::NAN; NF],
        }
    }
}

/// [`parse`] on bytes, into `out` (which must be fresh): false sends the
/// line to serde_json. With `ASCII`, a byte that is not ASCII anywhere in
/// the line also gives up, so a line read here is valid UTF-8.
#[inline(always)]
pub(crate) fn parse_into<'a, const ASCII: bool>(
    b: &'a [u8],
    cache: &mut KeyCache,
    out: &mut FastBytes<'a>,
) -> bool {
    parse_fields::<ASCII>(b, cache, out).is_some()
}

/// What follows a member of the object: the next key's opening quote, or
/// the end of the line.
enum Next {
    Key(usize),
    End,
}

/// Reads the members of a flat object into `out`; `None` gives up. A known
/// key given twice gives up too, so that serde_json reports it.
fn parse_fields<'a, const ASCII: bool>(
    b: &'a [u8],
    cache: &mut KeyCache,
    out: &mut FastBytes<'a>,
) -> Option<()> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (skip_ws(b, i + 1) == b.len()).then_some(());
    }
    let mut pos = 0usize;
    let mut seen = 0u64;
    loop {
        pos += 1;
        let (id, at) = member_key::<ASCII>(b, i, pos, cache)?;
        if id != K_OTHER {
            let bit = 1u64 << id;
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
        }
        i = member_value::<ASCII>(b, at, id, out)?;
        match next_member(b, i)? {
            Next::Key(k) => i = k,
            Next::End => return Some(()),
        }
    }
}

/// The key of the `pos`-th member, whose opening quote is at `b[i]`: its
/// id, and where its value starts (past the colon and any space).
#[inline(always)]
fn member_key<const ASCII: bool>(
    b: &[u8],
    i: usize,
    pos: usize,
    cache: &mut KeyCache,
) -> Option<(u8, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let key_at = i + 1;
    let (id, kend) = match cache.hit(pos, b, key_at) {
        Some(hit) => hit,
        None => {
            let kend = plain_string::<ASCII>(b, key_at)?;
            (cache.lookup(pos, b, key_at, kend), kend)
        }
    };
    let mut i = kend + 1;
    if b.get(i) != Some(&b':') {
        i = skip_ws(b, i);
        if b.get(i) != Some(&b':') {
            return None;
        }
    }
    i += 1;
    if !matches!(b.get(i), Some(b'"' | b'-' | b'0'..=b'9')) {
        i = skip_ws(b, i);
    }
    Some((id, i))
}

/// Reads the value at `b[i]` of the key `id` into `out`; returns where it
/// ends, or `None` for a value of a type the key does not take (or one
/// that is not flat).
#[inline(always)]
fn member_value<'a, const ASCII: bool>(
    b: &'a [u8],
    i: usize,
    id: u8,
    out: &mut FastBytes<'a>,
) -> Option<usize> {
    match *b.get(i)? {
        b'"' => {
            let vend = plain_string::<ASCII>(b, i + 1)?;
            let v = &b[i + 1..vend];
            match id {
                K_KIND => out.kind = Some(v),
                K_HOST => out.host = Some(v),
                K_JOB => out.job_id = Some(v),
                K_OTHER => {}
                _ => return None,
            }
            Some(vend + 1)
        }
        b'-' | b'0'..=b'9' => {
            let (v, end) = number_at(b, i)?;
            match id {
                K_T => out.t = Some(v),
                K_KIND | K_HOST | K_JOB => return None,
                K_OTHER => {}
                f => out.values[f as usize] = v,
            }
            Some(end)
        }
        // Absent, as in serde's Option.
        b'n' if b[i..].starts_with(b"null") && id != K_T && id != K_KIND => Some(i + 4),
        b't' if b[i..].starts_with(b"true") && id == K_OTHER => Some(i + 4),
        b'f' if b[i..].starts_with(b"false") && id == K_OTHER => Some(i + 5),
        _ => None,
    }
}

/// After a member's value at `b[i]`: the next key, or the end of the
/// object (and of the line, but for space).
#[inline(always)]
fn next_member(b: &[u8], i: usize) -> Option<Next> {
    let i = match b.get(i) {
        Some(b',' | b'}') => i,
        _ => skip_ws(b, i),
    };
    match b.get(i) {
        Some(b',') => {
            let k = i + 1;
            Some(Next::Key(if b.get(k) == Some(&b'"') {
                k
            } else {
                skip_ws(b, k)
            }))
        }
        Some(b'}') => (skip_ws(b, i + 1) == b.len()).then_some(Next::End),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{values_of, RawSample, RSS};
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;

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
        assert_eq!((a.values[RSS], a.values[crate::fields::CPI]), (5.0, 2.0));
        assert_eq!((b.values[RSS], b.values[crate::fields::CPI]), (9.0, 7.0));
    }

    #[test]
    fn key_ids_name_the_fields() {
        for (k, f) in FIELDS.iter().enumerate() {
            assert_eq!(key_id(f.name.as_bytes()), k as u8, "{}", f.name);
        }
        assert_eq!(key_id(b"t"), K_T);
        assert_eq!(key_id(b"kind"), K_KIND);
        assert_eq!(key_id(b"host"), K_HOST);
        assert_eq!(key_id(b"job_id"), K_JOB);
        for k in ["", "x", "cpu_frac", "rss_mbb", "lustre_write_mbpsx", "Kind"] {
            assert_eq!(key_id(k.as_bytes()), K_OTHER, "{k}");
        }
    }

    #[test]
    fn cached_keys_match_only_the_same_key() {
        let mut cache = KeyCache::default();
        let lines = [
            r#"{"kind":"sample","t":1,"lustre_write_mbps":2,"rss_mb":3}"#,
            r#"{"kind":"sample","t":1,"lustre_write_mbps":4,"rss_mbx":5}"#,
            r#"{"kind":"sample","t":1,"lustre_write_mbpz":6,"rss_m":7}"#,
            r#"{"kind":"sample","t":1,"lustre_write_mbps":8,"rss_mb":9}"#,
            r#"{"kind":"sample","t":1,"lustre_write_mbps":8,"rss_mb\":9}"#,
        ];
        let lw = crate::fields::idx("lustre_write_mbps");
        let got: Vec<(f64, f64)> = lines
            .iter()
            .map(|l| match parse(l, &mut cache) {
                Some(f) => (f.values[lw], f.values[RSS]),
                None => (-1.0, -1.0),
            })
            .map(|(a, b)| {
                (
                    if a.is_nan() { 0.0 } else { a },
                    if b.is_nan() { 0.0 } else { b },
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(2.0, 3.0), (4.0, 0.0), (0.0, 0.0), (8.0, 9.0), (-1.0, -1.0)]
        );
    }

    #[test]
    fn the_ascii_byte_path_gives_up_on_other_bytes() {
        let line = r#"{"kind":"sample","t":1,"host":"nöde","rss_mb":5}"#;
        let mut cache = KeyCache::default();
        let mut f = FastBytes::new();
        assert!(!parse_into::<true>(line.as_bytes(), &mut cache, &mut f));
        let f = parse(line, &mut cache).unwrap();
        assert_eq!(f.host, Some("nöde"));
        // A key seen with a non-ASCII byte is not cached for the byte path.
        let line = r#"{"kind":"sample","t":1,"é":2}"#;
        assert!(parse(line, &mut cache).is_some());
        let mut f = FastBytes::new();
        assert!(!parse_into::<true>(line.as_bytes(), &mut cache, &mut f));
        let mut f = FastBytes::new();
        let ok = r#"{ "kind" : "sample" , "t" : 2.5 , "rss_mb" : -7 }"#;
        assert!(parse_into::<true>(ok.as_bytes(), &mut cache, &mut f));
        assert_eq!((f.t, f.values[RSS]), (Some(2.5), -7.0));
    }

    #[test]
    fn strings_end_at_the_first_quote_or_escape() {
        for (s, end) in [
            ("\"", Some(0)),
            ("abc\"", Some(3)),
            ("abcdefgh\"", Some(8)),
            ("abcdefghijklmnopq\",", Some(17)),
            ("abcdefg\\\"", None),
            ("abcdefghij", None),
            ("", None),
        ] {
            assert_eq!(plain_string::<true>(s.as_bytes(), 0), end, "{s}");
            assert_eq!(plain_string::<false>(s.as_bytes(), 0), end, "{s}");
        }
        assert_eq!(plain_string::<true>("aé\"".as_bytes(), 0), None);
        assert_eq!(plain_string::<false>("aé\"".as_bytes(), 0), Some(3));
    }

    #[test]
    fn a_repeated_field_goes_to_serde_which_refuses_it() {
        // Issue 9: the fast path took the last of two values where serde
        // reports a duplicate field.
        for l in [
            r#"{"kind":"sample","t":1,"rss_mb":1,"rss_mb":2}"#,
            r#"{"kind":"sample","t":1,"t":2}"#,
            r#"{"kind":"sample","host":"a","t":1,"host":"b"}"#,
        ] {
            assert!(parse(l, &mut KeyCache::default()).is_none(), "{l}");
            assert!(serde_json::from_str::<RawSample>(l).is_err(), "{l}");
        }
        let twice = r#"{"kind":"sample","t":1,"x":1,"x":2,"rss_mb":3}"#;
        assert!(parse(twice, &mut KeyCache::default()).is_some());
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

    /// A JSON value of any of the kinds a line may hold.
    fn json_value() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(|v| format!("{v}")),
            2 => any::<i32>().prop_map(|v| v.to_string()),
            1 => (any::<f64>(), -30i32..30).prop_filter("finite", |(v, _)| v.is_finite())
                .prop_map(|(v, e)| format!("{v}e{e}")),
            1 => (0u32..100_000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b:03}")),
            2 => "[a-z0-9 ]{0,12}".prop_map(|s| format!("\"{s}\"")),
            1 => prop_oneof![Just("\"a\\\"b\""), Just("\"n\\u00f6\""), Just("\"nöde\"")].prop_map(str::to_owned),
            1 => prop_oneof![Just("null"), Just("true"), Just("false"), Just("{\"a\":1}"), Just("[1,2]"), Just("-"), Just("1.")].prop_map(str::to_owned),
        ]
    }

    /// A key: mostly one hpc-merge reads.
    fn key() -> impl Strategy<Value = String> {
        let mut names: Vec<&'static str> = FIELDS.iter().map(|f| f.name).collect();
        names.extend([
            "t", "host", "job_id", "kind", "cpu_frac", "note", "rss_mbx", "é",
        ]);
        proptest::sample::select(names).prop_map(str::to_owned)
    }

    /// A flat object line, with random spacing and the `kind` set to
    /// `sample` in most.
    fn line() -> impl Strategy<Value = String> {
        let pair = (key(), json_value(), "[ ]{0,1}", "[ ]{0,1}");
        (proptest::collection::vec(pair, 0..12), any::<bool>()).prop_map(|(pairs, sample)| {
            let mut parts: Vec<String> = pairs
                .into_iter()
                .map(|(k, v, a, b)| format!("\"{k}\"{a}:{b}{v}"))
                .collect();
            if sample {
                parts.insert(0, "\"kind\":\"sample\"".into());
            }
            format!("{{{}}}", parts.join(","))
        })
    }

    /// Equal, or (beyond the 15 digits the fast path computes exactly)
    /// within four units in the last place: serde_json's own float parsing
    /// is not correctly rounded there, the standard parser is (a CI run
    /// drew -4.375608889862337e-307, three units apart; two were allowed).
    fn same(a: f64, b: f64) -> bool {
        a == b
            || (a.is_nan() && b.is_nan())
            || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
    }

    proptest! {
        #[test]
        fn the_fast_path_and_serde_agree_on_random_lines(l in line()) {
            let mut cache = KeyCache::default();
            let serde = serde_json::from_str::<RawSample>(&l);
            let mut bytes = FastBytes::new();
            let ascii = parse_into::<true>(l.as_bytes(), &mut cache, &mut bytes);
            match parse(&l, &mut cache) {
                None => prop_assert!(!ascii, "the byte path took what the text path did not: {l}"),
                Some(f) => {
                    let raw = match serde {
                        Ok(raw) => raw,
                        Err(e) => return Err(TestCaseError::fail(format!("serde refused what the fast path read: {l}: {e}"))),
                    };
                    prop_assert_eq!(f.kind, raw.kind.as_deref(), "{}", l);
                    prop_assert_eq!(f.host, raw.host.as_deref(), "{}", l);
                    prop_assert_eq!(f.job_id, raw.job_id.as_deref(), "{}", l);
                    prop_assert!(same(f.t.unwrap_or(f64::NAN), raw.t.unwrap_or(f64::NAN)), "t: {}", l);
                    let want = values_of(&raw);
                    for (k, (x, y)) in want.iter().zip(&f.values).enumerate() {
                        prop_assert!(same(*x, *y), "{}: {} vs {}: {}", FIELDS[k].name, x, y, l);
                    }
                    if ascii {
                        prop_assert_eq!(bytes.t, f.t);
                        prop_assert!(bytes.values.iter().zip(&f.values).all(|(a, b)| same(*a, *b)));
                    }
                }
            }
        }
    }
}
