//! The `mail` subcommand: one user's digest as an RFC 5322 message
//! (multipart/alternative: a plain-text part and an HTML part, both UTF-8
//! in base64; a non-ASCII subject as an RFC 2047 encoded word) for
//! `sendmail -t`.

use std::fmt::Write as _;
use std::io::Write;

use hpc_core::record::Job;
use hpc_core::slurm::{civil_from_epoch, parse_date, Timestamp};
use hpc_core::{Error, Result};

use crate::draw::short_value;
use crate::html::{escape, page, rec_lines, user_body, user_of, Index};
use crate::stream::Stream;
use crate::MailArgs;

/// The checked `mail` options.
#[derive(Debug, Clone)]
pub struct MailOpts {
    /// The user.
    pub user: String,
    /// The To address.
    pub to: String,
    /// The From address.
    pub from: Option<String>,
    /// Jobs that ended at or after this epoch second.
    pub since: Option<i64>,
}

/// An address for a header: printable ASCII without spaces, else a usage
/// error (a newline would forge headers).
fn address(flag: &str, v: &str) -> Result<String> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic()) || v.contains(['<', '>', ',', '"'])
    {
        return Err(Error::Usage(format!(
            "{flag} '{}': not a plain ASCII address",
            hpc_core::paths::escaped(v)
        )));
    }
    Ok(v.to_string())
}

impl MailOpts {
    /// Checks the arguments.
    pub fn from_args(a: &MailArgs) -> Result<MailOpts> {
        if a.user.is_empty() || a.user.chars().any(char::is_control) {
            return Err(Error::Usage(
                "--user: empty or with control characters".into(),
            ));
        }
        let since = match &a.since {
            None => None,
            Some(s) => Some(parse_date(s).map_err(|_| {
                Error::Usage(format!(
                    "--since '{}': not YYYY-MM-DD[THH:MM:SS]",
                    hpc_core::paths::escaped(s)
                ))
            })?),
        };
        Ok(MailOpts {
            to: match &a.to {
                Some(to) => address("--to", to)?,
                None => address("--user (the address without --to)", &a.user)?,
            },
            from: a
                .from
                .as_deref()
                .map(|f| address("--from", f))
                .transpose()?,
            user: a.user.clone(),
            since,
        })
    }
}

/// Base64 of `bytes`, in lines of 76 characters.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + bytes.len() / 38 + 4);
    for (i, c) in bytes.chunks(3).enumerate() {
        if i > 0 && i % 19 == 0 {
            out.push_str("\r\n");
        }
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A header value: as it is when printable ASCII, else RFC 2047 encoded
/// words (UTF-8, base64), each under 76 characters.
pub fn header_text(s: &str) -> String {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return s.to_string();
    }
    let mut words = Vec::new();
    let mut chunk = String::new();
    for c in s.chars().filter(|c| !c.is_control()) {
        if chunk.len() + c.len_utf8() > 45 {
            words.push(std::mem::take(&mut chunk));
        }
        chunk.push(c);
    }
    words.push(chunk);
    words
        .iter()
        .map(|w| format!("=?UTF-8?B?{}?=", base64(w.as_bytes())))
        .collect::<Vec<_>>()
        .join("\r\n ")
}

/// The date of `epoch` as RFC 5322 writes it, in UTC.
pub fn rfc5322_date(epoch: i64) -> String {
    let (y, mo, d, h, mi, s) = civil_from_epoch(epoch);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
        [epoch.div_euclid(86400).rem_euclid(7) as usize];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][mo as usize - 1];
    format!("{wd}, {d} {mon} {y} {h:02}:{mi:02}:{s:02} +0000")
}

/// The user's jobs of the digest.
fn digest_jobs<'a>(stream: &'a Stream, opts: &MailOpts) -> Vec<&'a Job> {
    stream
        .jobs
        .iter()
        .filter(|j| user_of(j) == opts.user)
        .filter(|j| match opts.since {
            None => true,
            Some(since) => j
                .end
                .as_deref()
                .and_then(Timestamp::from_rfc3339)
                .is_some_and(|t| t.epoch >= since),
        })
        .collect()
}

/// The plain-text digest.
pub fn text_body(idx: &Index, opts: &MailOpts, jobs: &[&Job]) -> String {
    let sum = |f: fn(&Job) -> Option<f64>| jobs.iter().filter_map(|j| f(j)).sum::<f64>();
    let mut s = format!(
        "Hello {},\n\n{} of your jobs are in this digest",
        opts.user,
        jobs.len()
    );
    if let Some(since) = opts.since {
        let _ = write!(
            s,
            " (ended since {})",
            Timestamp { epoch: since }.to_rfc3339()
        );
    }
    let _ = write!(
        s,
        ".\nCPU hours: {} reserved, {} wasted.\nMemory GiB-hours: {} reserved, {} wasted.\n\nJobs:\n",
        short_value(sum(|j| j.cpu_hours_reserved)),
        short_value(sum(|j| j.cpu_hours_wasted)),
        short_value(sum(|j| j.mem_gb_hours_reserved)),
        short_value(sum(|j| j.mem_gb_hours_wasted)),
    );
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}%"));
    for j in jobs {
        let _ = writeln!(
            s,
            "  {} {} {}: CPU efficiency {}, memory efficiency {}",
            j.job_id,
            j.job_name.as_deref().unwrap_or(""),
            j.state,
            pct(j.cpu_eff),
            pct(j.mem_eff)
        );
    }
    let flags: Vec<String> = jobs
        .iter()
        .flat_map(|j| {
            idx.flags_of(j)
                .map(move |f| format!("  {} {}: {}", j.job_id, f.flag, f.reason))
        })
        .collect();
    if !flags.is_empty() {
        let _ = write!(s, "\nFlags:\n{}\n", flags.join("\n"));
    }
    for r in idx.recs.get(opts.user.as_str()).into_iter().flatten() {
        s.push_str("\nFor your next job:\n");
        for l in rec_lines(r) {
            let _ = writeln!(s, "  {l}");
        }
    }
    s
}

/// Writes the digest message.
pub fn write_mail(out: &mut dyn Write, stream: &Stream, opts: &MailOpts) -> Result<()> {
    let idx = Index::new(stream);
    let jobs = digest_jobs(stream, opts);
    if jobs.is_empty() {
        // A mistyped --user, or a dump that failed upstream: no digest of
        // nothing goes out.
        return Err(Error::Other(format!(
            "no jobs of user '{}'{} in the input: no mail written",
            hpc_core::paths::escaped(&opts.user),
            if opts.since.is_some() {
                " since --since"
            } else {
                ""
            }
        )));
    }
    let subject = format!("hpc-sizer: {} jobs of {}", jobs.len(), opts.user);
    let text = text_body(&idx, opts, &jobs);
    let html = page(
        &subject,
        &format!(
            "<p>{}</p>\n{}",
            escape(&format!("Hello {},", opts.user)),
            user_body(stream, &idx, &opts.user, &jobs, false)?
        ),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let boundary = format!("=_hpc-sizer_{now}_{}", std::process::id());
    let mut m = String::new();
    if let Some(from) = &opts.from {
        let _ = write!(m, "From: {from}\r\n");
    }
    let _ = write!(
        m,
        "To: {}\r\nSubject: {}\r\nDate: {}\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n\
This is a message in MIME format.\r\n",
        opts.to,
        header_text(&subject),
        rfc5322_date(now)
    );
    for (ty, body) in [("text/plain", text), ("text/html", html)] {
        let _ = write!(
            m,
            "\r\n--{boundary}\r\nContent-Type: {ty}; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n",
            base64(body.as_bytes())
        );
    }
    let _ = write!(m, "\r\n--{boundary}--\r\n");
    out.write_all(m.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (a, b) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(a.as_bytes()), b);
        }
        let long = base64(&[0u8; 100]);
        assert!(long.lines().all(|l| l.len() <= 76), "{long}");
    }

    #[test]
    fn dates_and_since() {
        assert_eq!(rfc5322_date(0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(parse_date("1970-01-02"), Ok(86400));
        assert_eq!(parse_date("1970-01-01T01:00:00"), Ok(3600));
        assert!(parse_date("1970-13-01").is_err());
        assert_eq!(header_text("plain"), "plain");
        assert!(header_text("jöbs").starts_with("=?UTF-8?B?"));
    }
}
