//! hpc-plot: every panel drawn from fixture series and checked pixel by
//! pixel, "not measured" for absent sources, the HTML report's escaping and
//! files, the mail parsed by Python's `email`, and the command line.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use hpc_testkit::{feed, show, Tool};

use hpc_plot::draw::{self, PanelGeom, FLAG, REFERENCE, TRACE_COLORS};
use hpc_plot::panels::plan;
use hpc_plot::stream::Stream;
use plotters::style::RGBColor;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-plot"));

/// `n` samples of job 7, one a second; `f(i)` gives the extra fields.
fn series(n: usize, host: Option<&str>, f: impl Fn(usize) -> String) -> String {
    let mut s = String::new();
    let host = host
        .map(|h| format!("\"host\":\"{h}\","))
        .unwrap_or_default();
    for i in 0..n {
        let t = 1_700_000_000 + i;
        s.push_str(&format!(
            "{{\"kind\":\"sample\",\"t\":{t},{host}\"job_id\":\"7\",{}}}\n",
            f(i)
        ));
    }
    s
}

const JOB: &str = "{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"7\",\"job_id_raw\":\"7\",\"user\":\"ann\",\"state\":\"OUT_OF_MEMORY\",\"is_final\":true,\"req_mem_mb\":4096,\"alloc_cpus\":4,\"job_name\":\"<script>alert(1)</script>\",\"cpu_hours_wasted\":3.0,\"mem_gb_hours_wasted\":1.5,\"mem_eff\":40,\"end\":\"2026-01-02T00:00:00Z\"}\n";
const SPIKE_AT: usize = 40_000;
const SPIKE_MB: f64 = 3584.0; // 3.5 GiB

/// A day of samples with every source, a one-sample RSS spike, and the job.
fn full_day() -> String {
    let mut s = JOB.to_string();
    s.push_str(&series(86_400, None, |i| {
        let rss = if i == SPIKE_AT { SPIKE_MB } else { 1024.0 };
        format!(
            "\"rss_mb\":{rss},\"cpu_cores\":2.0,\"read_mbps\":5,\"write_mbps\":2,\"threads\":8,\
\"lustre_read_mbps\":3,\"lustre_write_mbps\":1,\"numa_miss_rate\":0.05"
        )
    }));
    s.push_str("{\"kind\":\"flag\",\"job_id\":\"7\",\"flag\":\"oom_killed\",\"category\":\"misuse\",\"value\":null,\"threshold\":null,\"reason\":\"killed <b>OOM</b>\"}\n");
    s
}

fn stream_of(text: &str) -> Stream {
    let mut s = Stream::default();
    for line in text.lines() {
        s.add(line).unwrap();
    }
    s
}

struct Image {
    rgb: Vec<u8>,
    width: usize,
    geoms: Vec<PanelGeom>,
}

impl Image {
    fn px(&self, x: i32, y: i32) -> [u8; 3] {
        let i = (y as usize * self.width + x as usize) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Exactly colour `c`, or for a trace colour also its pale envelope
    /// (the same hue blended with white).
    fn is(&self, x: i32, y: i32, c: RGBColor) -> bool {
        let [r, g, b] = self.px(x, y);
        if [r, g, b] == [c.0, c.1, c.2] {
            return true;
        }
        let pale =
            |v: u8, cv: u8| (i32::from(v) - (255 - (255 - i32::from(cv)) * 4 / 10)).abs() <= 2;
        TRACE_COLORS.contains(&c) && pale(r, c.0) && pale(g, c.1) && pale(b, c.2)
    }

    /// Pixels of colour `c` in rows `rows` and columns `cols`.
    fn count(&self, cols: std::ops::Range<i32>, rows: std::ops::Range<i32>, c: RGBColor) -> usize {
        rows.flat_map(|y| cols.clone().map(move |x| (x, y)))
            .filter(|(x, y)| self.is(*x, *y, c))
            .count()
    }

    /// The pixel row of value `v` in panel `p`.
    fn row(&self, p: usize, v: f64) -> i32 {
        let g = &self.geoms[p];
        let h = f64::from(g.y.end - g.y.start - 1);
        g.y.start + ((1.0 - v / g.y_max) * h).round() as i32
    }
}

fn render(text: &str, width: u32) -> Image {
    let stream = stream_of(text);
    let plot = plan(&stream, "7", draw::job_columns(width)).unwrap();
    let size = draw::job_size(width);
    let (rgb, geoms) = draw::bitmap(size, |root| draw::draw_job(root, &plot, "test")).unwrap();
    assert_eq!(rgb.len(), size.0 as usize * size.1 as usize * 3);
    Image {
        rgb,
        width: width as usize,
        geoms,
    }
}

#[test]
fn every_panel_is_drawn_with_its_reference_line_and_the_spike_survives() {
    let img = render(&full_day(), 1200);
    assert_eq!(img.geoms.len(), 6);
    for (p, g) in img.geoms.iter().enumerate() {
        let drawn = img.count(g.x.clone(), g.y.clone(), TRACE_COLORS[0]);
        assert!(drawn > 200, "panel {p} is blank ({drawn} trace pixels)");
    }
    assert!(
        img.count(
            img.geoms[2].x.clone(),
            img.geoms[2].y.clone(),
            TRACE_COLORS[1]
        ) > 200,
        "disk write"
    );
    // Requested 4 GiB, 4 CPUs allocated, the 0.20 NUMA line: a red row
    // across the plotting area at that value.
    for (p, v) in [(0, 4.0), (1, 4.0), (5, 0.20)] {
        let g = &img.geoms[p];
        let y = img.row(p, v);
        let red = img.count(g.x.clone(), y - 1..y + 2, REFERENCE);
        let width = (g.x.end - g.x.start) as usize;
        assert!(
            red > width * 8 / 10,
            "panel {p}: {red} reference pixels of {width} at row {y}"
        );
    }
    // No reference line where there is no request (threads).
    let g = &img.geoms[3];
    assert_eq!(img.count(g.x.clone(), g.y.clone(), REFERENCE), 0);
    // The one-sample spike (3.5 GiB among 1 GiB) is drawn after reduction.
    let g = &img.geoms[0];
    let x = g.x.start + (SPIKE_AT as f64 / 86_400.0 * f64::from(g.x.end - g.x.start)) as i32;
    let y = img.row(0, SPIKE_MB / 1024.0);
    assert!(
        img.count(x - 3..x + 4, y - 2..y + 3, TRACE_COLORS[0]) > 0,
        "spike at ({x}, {y})"
    );
    assert_eq!(
        img.count(g.x.clone(), y - 2..y + 3, TRACE_COLORS[0]),
        img.count(x - 3..x + 4, y - 2..y + 3, TRACE_COLORS[0])
    );
    // The OOM flag is marked at the end of the memory panel.
    assert!(
        img.count(g.x.end - 4..g.x.end, g.y.clone(), FLAG) > 20,
        "oom mark"
    );
}

#[test]
fn the_png_file_has_the_size_of_the_plot() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("job.png");
    let (code, _, err) = TOOL.cli(
        &["job", "-o", out.to_str().unwrap(), "--width", "900"],
        &full_day(),
    );
    assert_eq!(code, 0, "{err}");
    let png = std::fs::read(&out).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (w, h) = draw::job_size(900);
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), w);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), h);
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// Only memory and CPU measured.
fn partial() -> String {
    series(600, None, |i| {
        format!("\"rss_mb\":{},\"cpu_cores\":1.5", 100 + i)
    })
}

#[test]
fn absent_sources_render_not_measured() {
    let (code, svg, err) = TOOL.cli(&["job", "--format", "svg"], &partial());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        svg.matches("not measured").count(),
        4,
        "disk, threads, Lustre, NUMA"
    );
    let (code, txt, _) = TOOL.cli(&["job", "--format", "txt"], &partial());
    assert_eq!(code, 0);
    for name in ["Disk (MiB/s) read", "Threads", "Lustre", "NUMA"] {
        let line = txt.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(line.ends_with("not measured"), "{line}");
    }
    let mem = txt.lines().find(|l| l.starts_with("Memory")).unwrap();
    assert!(mem.contains('█') && !mem.contains("not measured"), "{mem}");
    // In the bitmap, an unmeasured panel has no trace drawn.
    let img = render(&partial(), 800);
    let g = &img.geoms[4];
    assert_eq!(img.count(g.x.clone(), g.y.clone(), TRACE_COLORS[0]), 0);
    assert!(
        img.count(
            img.geoms[0].x.clone(),
            img.geoms[0].y.clone(),
            TRACE_COLORS[0]
        ) > 100
    );
}

#[test]
fn several_hosts_draw_node_lines_and_a_bold_job_line() {
    let mut text = series(300, Some("n1"), |_| "\"cpu_cores\":1.0".into());
    text.push_str(&series(300, Some("n2"), |_| "\"cpu_cores\":3.0".into()));
    let stream = stream_of(&text);
    let plot = plan(&stream, "7", 100).unwrap();
    let cpu = &plot.panels[1];
    let hosts: Vec<_> = cpu.lines.iter().map(|l| l.host.clone()).collect();
    assert_eq!(hosts, vec![Some("n1".into()), Some("n2".into()), None]);
    let job = cpu
        .lines
        .last()
        .unwrap()
        .bins
        .iter()
        .flatten()
        .next()
        .unwrap();
    assert_eq!(job.max, 4.0, "the job line sums the nodes");
}

#[test]
fn the_txt_sparkline_keeps_the_spike() {
    let (code, txt, err) = TOOL.cli(&["job", "--format", "txt", "--width", "60"], &full_day());
    assert_eq!(code, 0, "{err}");
    let mem = txt.lines().find(|l| l.starts_with("Memory")).unwrap();
    assert!(
        mem.contains("max 3.5") && mem.contains("requested 4,") || mem.ends_with("requested 4"),
        "{mem}"
    );
    assert!(txt.contains("flag oom_killed"), "{txt}");
}

#[test]
fn report_rows_draw_bars() {
    let rows = "{\"kind\":\"report\",\"by\":\"user\",\"user\":\"ann\",\"jobs\":3,\"cpu_h\":10,\"cpu_wasted_h\":4,\"cpu_eff\":60,\"mem_gbh\":8,\"mem_wasted_gbh\":6,\"mem_eff\":25,\"gpu_h\":0}\n\
{\"kind\":\"report\",\"by\":\"user\",\"user\":null,\"jobs\":1,\"cpu_h\":2,\"cpu_wasted_h\":1,\"cpu_eff\":50,\"mem_gbh\":1,\"mem_wasted_gbh\":0.5,\"mem_eff\":50,\"gpu_h\":1}\n";
    let (code, svg, err) = TOOL.cli(&["report"], rows);
    assert_eq!(code, 0, "{err}");
    assert!(svg.contains("CPU hours by user") && svg.contains("\nann\n") && svg.contains("(none)"));
    // One key alone: bars of a positive width (Chromium reports a negative
    // one as an error).
    let one = rows.lines().next().unwrap();
    let (code, svg, _) = TOOL.cli(&["report"], one);
    assert_eq!(code, 0);
    assert!(svg.contains("<rect") && !svg.contains("width=\"-"), "{svg}");
    let png = TOOL.feed(&["report", "--format", "png"], rows.as_bytes());
    assert_eq!(png.status.code(), Some(0), "{}", show(&png));
    assert_eq!(&png.stdout[1..4], b"PNG");
    let (code, _, err) = TOOL.cli(&["report"], "");
    assert_eq!(code, 1);
    assert!(err.contains("no report records"), "{err}");
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_html_report_escapes_user_strings_and_is_private_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("site");
    let mut text = full_day();
    text.push_str("{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"8\",\"job_id_raw\":\"8\",\"user\":\"<img src=x>\",\"state\":\"COMPLETED\",\"is_final\":true}\n");
    text.push_str("{\"kind\":\"report\",\"by\":\"user\",\"user\":\"<i>ann</i>\",\"jobs\":1,\"cpu_h\":1,\"cpu_wasted_h\":0.5}\n");
    text.push_str("{\"kind\":\"rec\",\"user\":\"ann\",\"tool\":\"blast\",\"risk\":0.05,\"mem_mb\":2048,\"cpus\":4,\"basis\":{\"mem_mb\":{\"tier\":\"history\",\"method\":\"order statistic\",\"n\":12,\"note\":\"p95 of 12 jobs\"}}}\n");
    let (code, _, err) = TOOL.cli(&["html", "--out", out.to_str().unwrap()], &text);
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode(&out), 0o700);
    let ann = out.join("user-ann.html");
    let other = out.join(hpc_plot::html::user_file("<img src=x>"));
    for p in [out.join("index.html"), ann.clone(), other.clone()] {
        assert_eq!(mode(&p), 0o600, "{}", p.display());
        let html = std::fs::read_to_string(&p).unwrap();
        for raw in ["<script>alert", "<img src", "<i>ann", "<b>OOM"] {
            assert!(!html.contains(raw), "{raw} unescaped in {}", p.display());
        }
        assert!(!html.contains("<script"), "no scripts at all");
    }
    let page = std::fs::read_to_string(&ann).unwrap();
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("killed &lt;b&gt;OOM&lt;/b&gt;"));
    // The rec as hpc-model writes it: the note of basis.mem_mb (it was
    // looked up under "mem", so a real rec showed no reason), the risk.
    assert!(page.contains("memory: 2 GiB (p95 of 12 jobs)"), "the rec");
    assert!(page.contains("risk: 5 %"), "the stated risk");
    assert!(page.contains("<svg"), "the job's plot inline");
    // A re-run with only ann replaces the pages and drops the other user's.
    let (code, _, err) = TOOL.cli(&["html", "--out", out.to_str().unwrap()], &full_day());
    assert_eq!(code, 0, "{err}");
    assert!(ann.exists() && !other.exists());
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.len(),
        3,
        "index, ann's page and the manifest; no temporary files left: {names:?}"
    );
    // An empty input (a dump that failed upstream) is an error that leaves
    // the report as it was: it deleted ann's page and wrote an empty index,
    // exit 0.
    let index = std::fs::read(out.join("index.html")).unwrap();
    let (code, _, err) = TOOL.cli(&["html", "--out", out.to_str().unwrap()], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no job, sample or report records"), "{err}");
    assert!(ann.exists(), "ann's page is kept");
    assert_eq!(std::fs::read(out.join("index.html")).unwrap(), index);
}

#[test]
fn an_existing_report_folder_keeps_its_mode_and_its_other_files() {
    // Issue 30: --out on an existing folder chmodded it to 0700 (a 2775
    // group folder lost group access and setgid) and deleted the owner's
    // own user-guide.html.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o2775)).unwrap();
    let guide = out.join("user-guide.html");
    std::fs::write(&guide, "<p>how to read the report</p>").unwrap();
    for _ in 0..2 {
        let (code, _, err) = TOOL.cli(&["html", "--out", out.to_str().unwrap()], &full_day());
        assert_eq!(code, 0, "{err}");
    }
    let m = std::fs::metadata(&out).unwrap().permissions().mode() & 0o7777;
    assert_eq!(m, 0o2775, "{m:o}");
    assert!(guide.exists(), "the owner's own file is kept");
    assert!(out.join("user-ann.html").exists());
}

#[test]
fn a_user_name_too_long_for_a_file_name_still_gets_a_page_and_the_index() {
    // Issue 30: one long or non-ASCII user name (file name too long)
    // aborted the whole report: no index.html.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("site");
    let long = "ü".repeat(200);
    let mut text = full_day();
    text.push_str(&format!("{{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"9\",\"job_id_raw\":\"9\",\"user\":\"{long}\",\"state\":\"COMPLETED\",\"is_final\":true}}\n"));
    let (code, _, err) = TOOL.cli(&["html", "--out", out.to_str().unwrap()], &text);
    assert_eq!(code, 0, "{err}");
    assert!(out.join("index.html").exists());
    let page = out.join(hpc_plot::html::user_file(&long));
    assert!(page.exists(), "{}", page.display());
    assert!(page.file_name().unwrap().len() < 160);
    assert_ne!(
        hpc_plot::html::user_file(&long),
        hpc_plot::html::user_file(&(long.clone() + "x")),
        "two long names stay apart"
    );
}

#[test]
fn the_mail_parses_into_a_text_and_an_html_part() {
    let mut text = full_day().replace("\"ann\"", "\"jörg\"");
    text.push_str(
        "{\"kind\":\"rec\",\"user\":\"jörg\",\"risk\":0.01,\"mem_mb\":1024,\"time_s\":3600}\n",
    );
    let out = TOOL.feed(
        &["mail", "--user", "jörg", "--to", "jorg@example.org"],
        text.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let mail = out.stdout;
    let py = r#"
import email, sys
from email import policy
m = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)
assert m.get_content_type() == "multipart/alternative", m.get_content_type()
parts = list(m.iter_parts())
assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"], parts
t, h = parts[0].get_content(), parts[1].get_content()
assert "jörg" in m["subject"], m["subject"]
assert m["to"] == "jorg@example.org"
assert "Hello jörg" in t and "oom_killed" in t and "memory: 1 GiB" in t, t
assert "&lt;script&gt;" in h and "<script>" not in h, h
print("ok", len(parts))
"#;
    let out = feed(
        std::process::Command::new("python3").args(["-c", py]),
        &mail,
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&mail)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok 2");
}

#[test]
fn a_header_injection_in_the_address_is_a_usage_error() {
    let (code, _, err) = TOOL.cli(&["mail", "--user", "ann", "--to", "a@b\nBcc: x@y"], "");
    assert_eq!(code, 2);
    assert!(err.contains("--to"), "{err}");
}

#[test]
fn bad_lines_are_named_and_the_rest_is_drawn() {
    let mut text = partial();
    text.insert_str(0, "{\"kind\":\"sample\",\"t\":\"x\"}\nnot json\n");
    let (code, txt, err) = TOOL.cli(&["job"], &text);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 1:") && err.contains("line 2: not JSON"),
        "{err}"
    );
    assert!(txt.contains("Memory"));
    let (code, _, err) = TOOL.cli(&["job"], "");
    assert_eq!(code, 1);
    assert!(err.contains("no samples"), "{err}");
    let (code, _, _) = TOOL.cli(&["job", "--format", "gif"], "");
    assert_eq!(code, 2);
}

#[test]
fn a_cut_last_line_is_reported_and_tolerated() {
    let mut text = partial();
    text.push_str("{\"kind\":\"sample\",\"t\":17");
    let (code, _, err) = TOOL.cli(&["job"], &text);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("line 601: truncated last line ignored"),
        "{err}"
    );
}

#[test]
fn the_mail_tells_only_the_jobs_since() {
    let mut text = JOB.to_string();
    text.push_str(
        &JOB.replace("\"7\"", "\"9\"")
            .replace("2026-01-02", "2025-06-01"),
    );
    let (code, mail, err) = TOOL.cli(&["mail", "--user", "ann", "--since", "2026-01-01"], &text);
    assert_eq!(code, 0, "{err}");
    assert!(mail.contains("Subject: hpc-sizer: 1 jobs of ann"), "{mail}");
    let (code, _, err) = TOOL.cli(&["mail", "--user", "ann", "--since", "yesterday"], "");
    assert_eq!(code, 2);
    assert!(err.contains("--since"), "{err}");
    // No job of the user, or none since: no digest of nothing for sendmail
    // (a mistyped --user printed "0 jobs of annn" and exited 0).
    for args in [
        &["mail", "--user", "annn"][..],
        &["mail", "--user", "ann", "--since", "2027-01-01"][..],
    ] {
        let (code, mail, err) = TOOL.cli(args, &text);
        assert_eq!(code, 1, "{err}");
        assert!(mail.is_empty(), "{mail}");
        assert!(err.contains("no jobs of user"), "{err}");
    }
    // A user name that is no address, without --to, names --user.
    let (code, _, err) = TOOL.cli(&["mail", "--user", "jörg"], &text);
    assert_eq!(code, 2);
    assert!(err.contains("--user"), "{err}");
}

#[test]
fn a_closed_pipe_is_quiet() {
    let first = TOOL.closed_pipe(&["job", "--format", "svg"], |mut sin| {
        sin.write_all(full_day().as_bytes()).unwrap();
    });
    assert!(first.starts_with("<svg"), "{first}");
}

#[test]
fn every_long_flag_in_help_is_in_the_man_page() {
    let man = TOOL.man_page();
    for sub in [
        &[][..],
        &["job"],
        &["report"],
        &["html"],
        &["mail"],
        &["backtest"],
    ] {
        let help = TOOL.help(sub);
        assert!(help.contains("Exit status") || !sub.is_empty());
        TOOL.assert_help_in_man(&help);
        for s in ["job", "report", "html", "mail", "backtest"] {
            assert!(
                man.contains(&format!(".B {s}")) || man.contains(&format!(".SS {s}")),
                "{s}"
            );
        }
    }
}

#[test]
fn control_characters_in_names_leave_the_svg_well_formed() {
    // A job id with \u0001 and an escape code made an SVG that is not
    // well-formed XML (a browser refuses it), and the text format wrote
    // the escape code to the terminal; a report key alike.
    let job = partial().replace("\"job_id\":\"7\"", "\"job_id\":\"7\\u0001\\u001b[31m\"");
    let report = "{\"kind\":\"report\",\"by\":\"user\",\"user\":\"a\\u0001b\",\"jobs\":1,\"cpu_h\":1,\"cpu_wasted_h\":0.5}\n";
    let py =
        "import sys, xml.dom.minidom as m; m.parseString(sys.stdin.buffer.read()); print('ok')";
    for (args, input) in [
        (&["job", "--format", "svg"][..], job.as_str()),
        (&["report", "--format", "svg"][..], report),
    ] {
        let (code, svg, err) = TOOL.cli(args, input);
        assert_eq!(code, 0, "{err}");
        let out = feed(
            std::process::Command::new("python3").args(["-c", py]),
            svg.as_bytes(),
        );
        assert!(out.status.success(), "{args:?}: {}", show(&out));
    }
    let (code, txt, err) = TOOL.cli(&["job"], &job);
    assert_eq!(code, 0, "{err}");
    assert!(!txt.contains('\u{1b}') && txt.contains("\\u{1b}"), "{txt}");
}

#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error_not_a_panic() {
    // std::env::args() panicked (exit 101, a backtrace) on a Latin-1 name.
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(b"f\xff.ndjson");
    let out = TOOL.command(&["job"]).arg(name).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not UTF-8") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn readings_no_meter_gives_are_rejected_with_their_line() {
    // rss_mb 1e39 overflowed the plot to inf (the axis fell back to 0..1),
    // a negative reading was clipped, t -1e12 drew a run of 277777777 h:
    // all drawn, exit 0.
    let mut text = partial();
    text.push_str("{\"kind\":\"sample\",\"t\":1700000700,\"job_id\":\"7\",\"rss_mb\":1e39}\n");
    text.push_str("{\"kind\":\"sample\",\"t\":1700000701,\"job_id\":\"7\",\"cpu_cores\":-1}\n");
    text.push_str("{\"kind\":\"sample\",\"t\":-1e12,\"job_id\":\"7\",\"rss_mb\":5}\n");
    let (code, txt, err) = TOOL.cli(&["job"], &text);
    assert_eq!(code, 1, "{err}");
    for l in [
        "line 601: sample: rss_mb",
        "line 602: sample: cpu_cores -1",
        "line 603: sample: t",
    ] {
        assert!(err.contains(l), "{l}: {err}");
    }
    assert!(txt.contains("Memory") && !txt.contains("inf"), "{txt}");
}

#[test]
fn a_lone_sample_is_drawn_as_a_dot() {
    // One sample: each panel's line had one point, which draws nothing.
    let one = series(1, None, |_| "\"rss_mb\":2048,\"cpu_cores\":2".into());
    let (code, svg, err) = TOOL.cli(&["job", "--format", "svg"], &one);
    assert_eq!(code, 0, "{err}");
    assert!(svg.matches("<circle").count() >= 2, "memory and CPU: {svg}");
    let (_, two, _) = TOOL.cli(&["job", "--format", "svg"], &partial());
    assert!(!two.contains("<circle"), "a line needs no dots");
}

#[test]
fn an_output_name_of_another_format_is_a_usage_error() {
    // -o plot.jpg wrote a PNG under that name; -o plot (no extension) is
    // a PNG, as the man page says.
    let dir = tempfile::tempdir().unwrap();
    let jpg = dir.path().join("plot.jpg");
    let (code, _, err) = TOOL.cli(&["job", "-o", jpg.to_str().unwrap()], &partial());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not png, svg or txt") && !jpg.exists(),
        "{err}"
    );
    let plain = dir.path().join("plot");
    let (code, _, err) = TOOL.cli(&["job", "-o", plain.to_str().unwrap()], &partial());
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&plain).unwrap().starts_with(b"\x89PNG"));
}
