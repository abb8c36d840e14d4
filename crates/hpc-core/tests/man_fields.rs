//! The man pages document every field of the record tables: a field added
//! to a table in `record.rs` and not to its man page fails here.

use std::collections::BTreeSet;
use std::path::Path;

use hpc_core::record::{Gpu, Job, Sample};

fn page(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../man")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The words (`[a-z0-9_]+`) of the part of `text` under the man(7) section
/// or subsection titled `title` (`.SH`/`.SS`, the title in any case), up to
/// the next section or subsection.
fn words_under(text: &str, title: &str) -> BTreeSet<String> {
    let mut inside = false;
    let mut found = false;
    let mut words = BTreeSet::new();
    for line in text.lines() {
        if let Some(t) = heading(line) {
            inside = t.eq_ignore_ascii_case(title);
            found |= inside;
            continue;
        }
        if inside {
            words.extend(
                line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned),
            );
        }
    }
    assert!(found, "no section {title}");
    words
}

/// The title of a `.SH` or `.SS` heading line.
fn heading(l: &str) -> Option<&str> {
    let t = l.strip_prefix(".SH ").or_else(|| l.strip_prefix(".SS "))?;
    Some(t.trim().trim_matches('"'))
}

fn missing(fields: &[hpc_core::fields::Field], words: &BTreeSet<String>) -> Vec<&'static str> {
    fields
        .iter()
        .map(|f| f.name)
        .filter(|n| !words.contains(*n))
        .collect()
}

#[test]
fn every_job_field_is_in_the_ingest_man_page_output_list() {
    // The OUTPUT section's own list, not its Formulas subsection.
    let words = words_under(&page("hpc-ingest.1"), "OUTPUT");
    assert_eq!(missing(Job::FIELDS, &words), Vec::<&str>::new());
}

#[test]
fn every_sample_field_is_in_the_probe_and_merge_man_pages() {
    let words = words_under(&page("hpc-probe.1"), "sample");
    assert_eq!(missing(Sample::FIELDS, &words), Vec::<&str>::new());
    // hpc-merge combines every number but the counts and cpu_frac.
    let words = words_under(&page("hpc-merge.1"), "INPUT");
    let numbers: Vec<_> = Sample::FIELDS
        .iter()
        .copied()
        .filter(|f| f.kind == hpc_core::fields::Kind::Real && f.name != "t" && f.name != "cpu_frac")
        .collect();
    assert_eq!(missing(&numbers, &words), Vec::<&str>::new());
}

#[test]
fn every_gpu_field_is_in_the_probe_man_page() {
    let words = words_under(&page("hpc-probe.1"), "gpu");
    assert_eq!(missing(Gpu::FIELDS, &words), Vec::<&str>::new());
}

#[test]
fn the_section_reader_stops_at_the_next_heading() {
    let text = ".SH OUTPUT\n.BR cluster ,\n.SS Formulas\n.B user\n.SH INPUT\nx\n";
    let w = words_under(text, "output");
    assert!(w.contains("cluster") && !w.contains("user"), "{w:?}");
    assert!(missing(Job::FIELDS, &w).contains(&"user"));
    let w = words_under(
        ".SS \"summary (per node)\"\n.B host\n",
        "summary (per node)",
    );
    assert!(w.contains("host"), "{w:?}");
}

#[test]
fn a_sample_field_left_out_of_the_probe_page_is_missing() {
    // The real pages, with the probe's `threads` entry taken out of its
    // sample list (hpc-merge's INPUT does not name it).
    let probe = page("hpc-probe.1");
    assert!(
        probe.contains("\n.TP\n.B threads\n"),
        "the probe page's entry"
    );
    let mut words = words_under(&probe.replace("\n.TP\n.B threads\n", "\n"), "sample");
    words.extend(words_under(&page("hpc-merge.1"), "INPUT"));
    assert_eq!(missing(Sample::FIELDS, &words), ["threads"]);
}
