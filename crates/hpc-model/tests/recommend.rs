//! hpc-model recommend and fit: the three tiers, censoring, CPUs, rounding,
//! the output formats, the models file, and the help in the man page.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hpc_core::advice::{Rec, Tier};
use hpc_testkit::Tool;

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));

/// Runs the binary with `stdin` and no store (HPC_SIZER_DB names none);
/// returns (code, stdout, stderr).
fn cli(args: &[&str], stdin: &str) -> (i32, String, String) {
    TOOL.cli_without_db(args, stdin)
}

/// The analysis record of a STAR script asking 64 GiB, 4 CPUs, 2 hours.
fn analysis(input_mb: f64) -> String {
    format!(
        r#"{{"kind":"analysis","user":"ana","script":"a.sbatch","script_sha256":"00","request":{{"mem_mb":65536,"cpus":4,"time_s":7200}},"tool":"star","tools":["star"],"inputs":[{{"path":"r.fq","size_mb":{input_mb},"type":"fastq","mem_factor":1.0}}],"input_mb":{input_mb}}}"#
    ) + "\n"
}

/// One job of tool `star` with its analysis record.
fn job(
    id: usize,
    state: &str,
    peak: f64,
    req: f64,
    elapsed: f64,
    cpu_s: f64,
    input: f64,
) -> String {
    format!(
        concat!(
            r#"{{"kind":"job","cluster":"c","job_id":"{id}","job_id_raw":"{id}","user":"ana","state":"{state}","end":"2026-01-01T00:{m:02}:{s:02}Z","#,
            r#""elapsed_s":{elapsed},"timelimit_s":7200,"alloc_cpus":4,"req_mem_mb":{req},"max_rss_mb":{peak},"total_cpu_s":{cpu_s},"is_final":true}}"#,
            "\n",
            r#"{{"kind":"analysis","job_id":"{id}","script":"a.sbatch","script_sha256":"00","request":{{}},"tool":"star","input_mb":{input}}}"#,
            "\n"
        ),
        id = id,
        m = id / 60,
        s = id % 60,
        state = state,
        elapsed = elapsed,
        req = req,
        peak = peak,
        cpu_s = cpu_s,
        input = input
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

fn rec_of(out: &str) -> Rec {
    hpc_core::record::from_line(out.trim_end()).unwrap()
}

/// `n` completed jobs peaking near `peak` MiB, using 16 cores for 1000 s.
fn history(n: usize, peak: f64) -> String {
    (0..n)
        .map(|i| {
            job(
                i,
                "COMPLETED",
                peak + (i % 5) as f64 * 10.0,
                65536.0,
                1000.0,
                16000.0,
                100.0,
            )
        })
        .collect()
}

fn recommend(dir: &Path, hist: &str, extra: &[&str]) -> Rec {
    let a = write(dir, "a.ndjson", &analysis(1000.0));
    let h = write(dir, "h.ndjson", hist);
    let mut args = vec![
        "recommend",
        a.as_str(),
        "--history",
        h.as_str(),
        "--format",
        "ndjson",
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = cli(&args, "");
    assert_eq!(code, 0, "{err}");
    rec_of(&out)
}

/// `n` completed jobs of `tool`, numbered from `from`, peaking at `peak`
/// MiB times a log-normal factor (log-sd 0.2, no ceiling: the parametric
/// predictor sizes them), for `elapsed` seconds.
fn spread(tool: &str, from: usize, n: usize, peak: f64, elapsed: f64) -> String {
    let mut rng = hpc_testkit::rng::Lcg::new(from as u64 + 1);
    (from..from + n)
        .map(|i| {
            let p = peak * (0.2 * rng.normal()).exp();
            job(i, "COMPLETED", p, 2.0 * p, elapsed, 100.0, 1.0)
                .replace(r#""tool":"star""#, &format!(r#""tool":"{tool}""#))
        })
        .collect()
}

#[test]
fn a_cheap_job_takes_a_smaller_share_of_the_risk_and_the_note_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // An early outlier at 4x keeps the group's largest value far above its
    // tail, so its own largest values would cost more than the log-normal
    // bound, which sizes it (and whose prices share the risk).
    let star = job(0, "COMPLETED", 40000.0, 65536.0, 1000.0, 100.0, 1.0)
        + &spread("star", 1, 39, 10000.0, 1000.0);
    // Beside costlier jobs of another tool (the typical job of the
    // history), STAR's cheap jobs are sized at a lower level: a larger
    // bound. The stated risk is kept and the note says which level and why.
    let cheap = recommend(
        dir.path(),
        &(star.clone() + &spread("gatk", 100, 60, 1e5, 1e4)),
        &[],
    );
    let b = &cheap.basis["mem_mb"];
    assert_eq!(b.method, "conformal, adaptive level");
    assert!(b.note.contains("1 % risk overall"), "{}", b.note);
    assert!(b.note.contains("a smaller share of the risk"), "{}", b.note);
    assert!(b.note.contains("to cost less memory-time"), "{}", b.note);
    // None of the 98 jobs the replay sized (all but each group's first) ran out: the note says so and
    // gives the level the calibration reached.
    assert!(
        b.note.contains(
            "of 98 earlier jobs this history sized, 0 ran out (0 %), and the online calibration has the level at"
        ),
        "{}",
        b.note
    );
    assert_eq!(cheap.risk, 0.01, "the stated risk is kept");
    // Beside cheaper jobs the same STAR jobs take a larger share.
    let costly = recommend(
        dir.path(),
        &(star + &spread("gatk", 100, 60, 100.0, 10.0)),
        &[],
    );
    let c = &costly.basis["mem_mb"];
    assert!(c.quantile.unwrap() < 0.99, "{c:?}");
    assert!(b.quantile.unwrap() > c.quantile.unwrap(), "{b:?} vs {c:?}");
    assert!(c.note.contains("a larger share of the risk"), "{}", c.note);
    assert!(cheap.mem_mb > costly.mem_mb, "{cheap:?} vs {costly:?}");
}

#[test]
fn one_sizer_sizes_every_history_length_from_the_first_job() {
    let dir = tempfile::tempdir().unwrap();
    // No earlier job: the heuristic keeps the request.
    let rec = recommend(dir.path(), "", &[]);
    assert_eq!(rec.basis["mem_mb"].tier, Tier::Heuristic);
    assert_eq!(
        rec.mem_mb,
        Some(65536.0),
        "a cold start never lowers a request"
    );
    // From the first job on, the calibrated sizer: never below the largest
    // peak, never above twice it, in whole 16 MiB steps.
    for n in [1, 3, 12, 40, 65] {
        let rec = recommend(dir.path(), &history(n, 14000.0), &[]);
        let b = &rec.basis["mem_mb"];
        assert_eq!(b.tier, Tier::History, "{n}: {b:?}");
        assert_eq!(b.n, Some(n as u64));
        let top = 14000.0 + ((n - 1).min(4) * 10) as f64;
        let mem = rec.mem_mb.unwrap();
        assert!(mem >= top && mem <= 2.0 * top, "{n} jobs: {mem}");
        assert_eq!(mem % 16.0, 0.0, "whole 16 MiB");
        assert!(
            b.note.contains(&format!("{n} earlier star jobs")),
            "{}",
            b.note
        );
        assert_eq!(
            b.note.contains("few jobs: the spread is borrowed"),
            n < 5,
            "{}",
            b.note
        );
    }
}

/// `n` jobs of STAR killed for memory at a 16 GiB limit, numbered from
/// `from`.
fn oom_at_16g(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| job(i, "OUT_OF_MEMORY", 16000.0, 16384.0, 100.0, 100.0, 100.0))
        .collect()
}

#[test]
fn jobs_killed_for_memory_are_never_advised_their_limit_again() {
    let dir = tempfile::tempdir().unwrap();
    // Issue 28: 12 of 12 jobs killed at 16G were advised 16448M. Whatever
    // the history's length, the advice is well above the limit.
    for n in [1, 3, 12, 65] {
        let rec = recommend(dir.path(), &oom_at_16g(0, n), &[]);
        let mem = rec.mem_mb.unwrap();
        assert!(mem >= 1.25 * 16384.0, "{n} killed at 16G: {mem}");
        assert!(rec.basis["mem_mb"].note.contains(&format!(
            "{n} earlier star jobs of yours, all of which ran out of memory"
        )));
    }
    // 60 killed at 16G and 5 completed at 30000M were advised 27520M,
    // below a completed peak; and the same with only 3 jobs.
    for (killed, done) in [(60, 5), (2, 1)] {
        let mut h = oom_at_16g(0, killed);
        for i in 0..done {
            h.push_str(&job(
                killed + i,
                "COMPLETED",
                30000.0,
                65536.0,
                100.0,
                100.0,
                100.0,
            ));
        }
        let mem = recommend(dir.path(), &h, &[]).mem_mb.unwrap();
        assert!(mem >= 30000.0, "{killed} killed, {done} at 30000M: {mem}");
    }
}

#[test]
fn oom_killed_jobs_count_as_needing_more_than_their_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = history(20, 1500.0);
    let plain = recommend(dir.path(), &h, &[]).mem_mb.unwrap();
    for i in 100..104 {
        h.push_str(&job(
            i,
            "OUT_OF_MEMORY",
            1900.0,
            2048.0,
            100.0,
            100.0,
            100.0,
        ));
    }
    let with_oom = recommend(dir.path(), &h, &[]).mem_mb.unwrap();
    assert!(
        with_oom >= 1.25 * 2048.0,
        "censored at the 2048 MiB limit: well above it, {with_oom}"
    );
    assert!(with_oom > plain, "{with_oom} vs {plain}");
}

#[test]
fn timeouts_are_censored_for_time_and_cpus_stay_under_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = history(20, 3000.0);
    let rec = recommend(dir.path(), &h, &[]);
    assert_eq!(
        rec.cpus,
        Some(4),
        "16 cores used, 4 requested: never above the request"
    );
    let t_plain = rec.time_s.unwrap();
    assert!(t_plain >= 1000.0 && t_plain % 60.0 == 0.0, "{t_plain}");
    let note = &rec.basis["time_s"].note;
    assert!(note.contains("of TIMEOUT"), "{note}");
    assert!(note.contains("backfill"), "{note}");
    for i in 200..204 {
        h.push_str(&job(i, "TIMEOUT", 3000.0, 65536.0, 7200.0, 100.0, 100.0));
    }
    let rec = recommend(dir.path(), &h, &[]);
    assert!(rec.time_s.unwrap() > 7200.0, "{:?}", rec.time_s);
}

#[test]
fn small_peaks_are_raised_to_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recommend(dir.path(), &history(30, 100.0), &[]);
    // Peaks of 100-140 MiB in a 5-job cycle: the tool's own ceiling, in
    // whole 16 MiB steps.
    // 30 jobs are too few for the 1 % rank: the largest, raised a step.
    assert!(matches!(rec.mem_mb, Some(144.0 | 160.0)), "{rec:?}");
    assert!(
        rec.basis["mem_mb"].note.contains("140M seen in 30 jobs"),
        "{}",
        rec.basis["mem_mb"].note
    );
    let tiny: String = (0..30)
        .map(|i| job(i, "COMPLETED", 3.0, 1024.0, 100.0, 10.0, 1.0))
        .collect();
    let rec = recommend(dir.path(), &tiny, &[]);
    assert_eq!(rec.mem_mb, Some(16.0), "3 MiB peaks: the 16 MiB floor");
    let rec = recommend(
        dir.path(),
        &history(30, 100.0),
        &["--mem-floor", "1024", "--mem-step", "256"],
    );
    assert_eq!(rec.mem_mb, Some(1024.0));
    // A fraction of a MiB was taken: --mem-floor 0.4 --mem-step 0.1 wrote
    // --mem=0M (all of a node), --mem-step 1000.3 wrote less than advised.
    let a = write(dir.path(), "a.ndjson", &analysis(1.0));
    let h = write(dir.path(), "tiny.ndjson", &tiny);
    for (floor, step) in [("0.4", "0.1"), ("16", "1000.3"), ("0", "16")] {
        let (code, _, err) = cli(
            &[
                "recommend",
                &a,
                "--history",
                &h,
                "--mem-floor",
                floor,
                "--mem-step",
                step,
            ],
            "",
        );
        assert_eq!(code, 2, "{floor} {step}: {err}");
        assert!(err.contains("whole numbers of MiB"), "{err}");
    }
}

#[test]
fn the_model_tier_follows_the_fitted_model_and_fit_refuses_too_few_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("m.json");
    let m = models.to_str().unwrap();
    // Other tools' jobs (no star history) with peak = 1000 + 2 x input.
    let hist: String = (0..30)
        .map(|i| {
            let input = 100.0 * (i + 1) as f64;
            job(
                i,
                "COMPLETED",
                1000.0 + 2.0 * input + (i % 3) as f64,
                9e4,
                100.0,
                100.0,
                input,
            )
        })
        .collect();
    let few: String = hist.lines().take(18).map(|l| format!("{l}\n")).collect();
    let h_few = write(dir.path(), "few.ndjson", &few);
    let (code, _, err) = cli(&["fit", "--history", &h_few, "--models", m], "");
    assert_eq!(code, 1, "9 jobs: {err}");
    assert!(err.contains("no tool has the 10 completed jobs"), "{err}");
    assert!(!models.exists());
    let h = write(dir.path(), "h.ndjson", &hist);
    let (code, _, err) = cli(&["fit", "--history", &h, "--models", m], "");
    assert_eq!(code, 0, "{err}");
    let mode = std::fs::metadata(&models).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "no temporary file left");
    // No star history of this user: the model tier, predicting 1000 + 2 x 5000.
    let a = write(dir.path(), "a.ndjson", &analysis(5000.0));
    let (code, out, err) = cli(&["recommend", &a, "--models", m, "--format", "ndjson"], "");
    assert_eq!(code, 0, "{err}");
    // Without --history the note's "no earlier jobs" is said why (a user
    // with 12 stored jobs of the tool read it as none found).
    assert!(err.contains("no --history given"), "{err}");
    let rec = rec_of(&out);
    assert_eq!(rec.basis["mem_mb"].tier, Tier::Model);
    // The model predicts 11000 MiB, but a cold start never lowers the
    // 64 GiB request below the heuristic (STAR's base + its input).
    let mem = rec.mem_mb.unwrap();
    assert_eq!(mem, 37776.0, "{rec:?}");
    assert!(rec.basis["mem_mb"].note.contains("never below"));
    // Without a request the model stands.
    let bare = analysis(5000.0).replace(r#""mem_mb":65536,"#, "");
    let a = write(dir.path(), "bare.ndjson", &bare);
    let (code, out, err) = cli(&["recommend", &a, "--models", m, "--format", "ndjson"], "");
    assert_eq!(code, 0, "{err}");
    let mem = rec_of(&out).mem_mb.unwrap();
    assert!((11000.0..11520.0).contains(&mem), "{mem}");
}

#[test]
fn formats_text_ndjson_and_sbatch() {
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "h.ndjson", &history(40, 14000.0));
    let a = analysis(1000.0);
    let (code, out, err) = cli(
        &["recommend", "-", "--history", &h, "--format", "sbatch"],
        &a,
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("#SBATCH --mem="), "{out}");
    assert!(lines.contains(&"#SBATCH --cpus-per-task=4"), "{out}");
    assert!(
        lines.iter().any(|l| l.starts_with("#SBATCH --time=00:")),
        "{out}"
    );
    let (code, out, _) = cli(&["recommend", "-", "--history", &h], &a);
    assert_eq!(code, 0);
    assert!(out.starts_with("--mem 64G -> "), "{out}");
    assert!(
        out.contains("40 earlier star jobs of yours peaked at most 13.7G"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 3, "mem, cpus, time: {out}");
    let (code, _, err) = cli(&["recommend", "-", "--format", "xml"], &a);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = cli(&["recommend", "-", "--history", "-"], &a);
    assert_eq!(code, 2);
}

#[test]
fn a_bad_history_line_is_reported_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "h.ndjson", &(history(10, 3000.0) + "{oops\n"));
    let a = write(dir.path(), "a.ndjson", &analysis(10.0));
    let (code, out, err) = cli(&["recommend", &a, "--history", &h], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 21:"), "{err}");
    assert!(out.contains("--mem"), "the advice is still printed: {out}");
}

#[test]
fn every_flag_in_the_help_is_in_the_man_page() {
    for sub in ["recommend", "fit", "backtest"] {
        TOOL.assert_help_in_man(&TOOL.help(&[sub]));
    }
}

#[test]
fn a_cold_start_keeps_the_cpus_asked_for() {
    // The table gives seurat 1 CPU; a script asking 8 with no history must
    // keep its 8 (it once came out as 1), as memory and time keep theirs.
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.ndjson",
        r#"{"kind":"analysis","script":"s.sbatch","script_sha256":"00","request":{"mem_mb":8192,"cpus":8},"tool":"seurat"}"#,
    );
    let h = write(dir.path(), "h.ndjson", "");
    let (code, out, err) = cli(
        &["recommend", &a, "--history", &h, "--format", "ndjson"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let rec = rec_of(&out);
    assert_eq!(rec.cpus, Some(8), "{out}");
    assert_eq!(rec.basis["cpus"].tier, Tier::Heuristic);
    assert_eq!(rec.mem_mb, Some(8192.0), "{out}");
}

#[test]
fn a_batch_script_on_a_pipe_is_read_once() {
    // recommend first looked at the script to tell a record from a batch
    // script, then opened it again to analyze it: from a pipe the second
    // read found nothing, and the advice was for an empty script.
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "h.ndjson", "");
    let script = "#!/bin/bash\n#SBATCH --mem=8G\n#SBATCH -c 4\nsamtools sort x.bam\n";
    let (code, out, err) = cli(
        &[
            "recommend",
            "/dev/stdin",
            "--history",
            &h,
            "--format",
            "ndjson",
        ],
        script,
    );
    assert_eq!(code, 0, "{err}");
    let rec = rec_of(&out);
    assert_eq!(rec.tool.as_deref(), Some("samtools"), "{out}");
    assert_eq!(rec.cpus, Some(4), "{out}");
    let asked = rec.request.expect("the request was read");
    assert_eq!(asked.mem_mb, Some(8192.0), "{out}");
}

#[test]
fn a_script_of_no_known_tool_matches_only_its_own_earlier_jobs() {
    // Issue 29: 30 small jobs of unknown tools (200 MiB, 10 min, 1 core) cut
    // a new 64G / 16-CPU / 2-day script named bigsim to 256M, 1 CPU and 12
    // minutes: every unknown tool was `generic`, and pooled.
    let dir = tempfile::tempdir().unwrap();
    let small: String = (0..30)
        .map(|i| {
            job(i, "COMPLETED", 200.0, 1024.0, 600.0, 600.0, 1.0)
                .replace(r#""tool":"star""#, r#""tool":"generic""#)
                .replace(r#""user":"ana","#, r#""user":"ana","job_name":"small.sh","#)
                .replace(r#""script_sha256":"00""#, r#""script_sha256":"aa""#)
        })
        .collect();
    let bigsim = concat!(
        r#"{"kind":"analysis","user":"ana","script":"/home/ana/bigsim.sbatch","script_sha256":"bb","#,
        r#""request":{"mem_mb":65536,"cpus":16,"time_s":172800},"tool":"generic","tools":[]}"#,
        "\n"
    );
    let a = write(dir.path(), "a.ndjson", bigsim);
    let h = write(dir.path(), "h.ndjson", &small);
    let run = || {
        let (code, out, err) = cli(
            &["recommend", &a, "--history", &h, "--format", "ndjson"],
            "",
        );
        assert_eq!(code, 0, "{err}");
        rec_of(&out)
    };
    let rec = run();
    assert_eq!(rec.mem_mb, Some(65536.0), "{rec:?}");
    assert_eq!(rec.cpus, Some(16), "{rec:?}");
    assert_eq!(rec.time_s, Some(172800.0), "{rec:?}");
    assert_eq!(rec.basis["mem_mb"].tier, Tier::Heuristic);
    // Its own earlier jobs (the same job name, sbatch's default: the
    // script's file name) are its history.
    let own = small.replace("small.sh", "bigsim.sbatch");
    std::fs::write(&h, own).unwrap();
    assert_eq!(run().basis["mem_mb"].tier, Tier::History);
    // So are those of the same script under another name.
    let same = small.replace(r#""script_sha256":"aa""#, r#""script_sha256":"bb""#);
    std::fs::write(&h, same).unwrap();
    assert_eq!(run().basis["mem_mb"].tier, Tier::History);
}

#[test]
fn a_tool_at_a_ceiling_is_told_so_and_advised_at_most_just_above_it() {
    let dir = tempfile::tempdir().unwrap();
    // Memory that follows input (slope 0.8) up to a 10 000 MiB buffer:
    // inputs 100 MiB to 9.3 GiB, the largest value from a smaller input
    // than the largest. Readings within 2 % of the largest passed it by at
    // most 1.6 % (9840 MiB, then 10 000): the margin the note gives.
    let hist: String = (0..40)
        .map(|i| {
            let input = 100.0 * 1.12f64.powi(i);
            let peak =
                (40.0 * f64::powf(input, 0.8)).min(10_000.0) * (1.0 + 0.004 * f64::from(i % 3));
            job(
                i as usize,
                "COMPLETED",
                peak,
                65536.0,
                1000.0,
                1000.0,
                input,
            )
        })
        .collect();
    let rec = recommend(dir.path(), &hist, &[]);
    let mem = rec.mem_mb.unwrap();
    let note = &rec.basis["mem_mb"].note;
    assert!(mem <= (1.02f64 * 10_080.0).ceil() + 16.0, "{mem}: {note}");
    assert!(
        note.contains("larger inputs gave no more than 9.8G: advised at most 1.016x it")
            && note.contains("sized at this tool's own ceiling of 9.8G seen in 40 jobs"),
        "{note}"
    );
}

#[test]
fn a_multi_task_job_is_advised_cpus_per_task_and_memory_per_node() {
    // -N2 --ntasks-per-node=4 -c 2 --mem=64G: 16 CPUs and 128G in all. The
    // sbatch lines said --cpus-per-task=16 (16 for each of 8 tasks), and the
    // text compared 128G in all with a per-node advice.
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "h.ndjson", &history(40, 14000.0));
    let a = analysis(1000.0).replace(
        r#""request":{"mem_mb":65536,"cpus":4,"time_s":7200}"#,
        r#""request":{"mem_mb":131072,"cpus":16,"time_s":7200,"nodes":2,"ntasks":8}"#,
    );
    let (code, out, err) = cli(
        &["recommend", "-", "--history", &h, "--format", "sbatch"],
        &a,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("#SBATCH --cpus-per-task=2\n"), "{out}");
    let (code, out, err) = cli(&["recommend", "-", "--history", &h], &a);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("--mem 64G -> "), "{out}");
    assert!(out.contains("--cpus-per-task 2 -> 2:"), "{out}");
}

#[test]
fn notes_name_the_limit_jobs_ran_out_at() {
    // Every job killed for memory at 16G: the note said they "peaked at
    // most 0M"; ten 1G jobs and one killed at 2G: it said the advice came
    // from the largest values, where the floor above the limit decided.
    let dir = tempfile::tempdir().unwrap();
    let oom: String = (0..3)
        .map(|i| job(i, "OUT_OF_MEMORY", 16384.0, 16384.0, 600.0, 600.0, 100.0))
        .collect();
    let h = write(dir.path(), "oom.ndjson", &oom);
    let (code, out, err) = cli(&["recommend", "-", "--history", &h], &analysis(100.0));
    assert_eq!(code, 0, "{err}");
    let mem = out.lines().next().unwrap();
    assert!(
        mem.contains("3 earlier star jobs of yours, all of which ran out of memory")
            && mem.contains("1.25x the largest limit one ran out at (16.0G)"),
        "{mem}"
    );
    assert!(!mem.contains(" 0M"), "{mem}");
    let mut mixed = history(10, 1000.0);
    mixed.push_str(&job(
        10,
        "OUT_OF_MEMORY",
        2048.0,
        2048.0,
        600.0,
        600.0,
        100.0,
    ));
    let h = write(dir.path(), "mixed.ndjson", &mixed);
    let (code, out, err) = cli(&["recommend", "-", "--history", &h], &analysis(100.0));
    assert_eq!(code, 0, "{err}");
    let mem = out.lines().next().unwrap();
    assert!(mem.starts_with("--mem 64G -> 2560M: "), "{mem}");
    assert!(
        mem.contains("1.25x the largest limit one ran out at (2.0G)"),
        "{mem}"
    );
}

#[test]
fn control_characters_in_a_note_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let h = write(
        dir.path(),
        "h.ndjson",
        &history(10, 1000.0).replace("star", "st\\u001b[2Jar"),
    );
    let a = analysis(100.0).replace("star", "st\\u001b[2Jar");
    let (code, out, err) = cli(&["recommend", "-", "--history", &h], &a);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("st\\u{1b}[2Jar"), "{out}");
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out}");
}

#[test]
fn a_script_is_sized_from_its_callers_jobs_only() {
    // A script, not an analysis record: its analysis named no user, and
    // every user's jobs of its tool in the history (an admin's dump) were
    // taken as "jobs of yours".
    let dir = tempfile::tempdir().unwrap();
    let h = write(dir.path(), "h.ndjson", &history(10, 14000.0));
    let script = write(
        dir.path(),
        "a.sbatch",
        "#!/bin/sh\n#SBATCH --mem=64G -c 4 -t 2:00:00\nSTAR --genomeDir g --readFilesIn r.fq\n",
    );
    let run = |user: &str| {
        let out = TOOL
            .command(&["recommend", &script, "--history", &h])
            .env("USER", user)
            .env("HPC_SIZER_DB", "/nonexistent/hpc-sizer.db")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let bob = run("bob");
    assert!(bob.contains("no earlier star jobs"), "{bob}");
    let ana = run("ana");
    assert!(ana.contains("10 earlier star jobs of yours"), "{ana}");
}

#[test]
fn an_analysis_record_without_a_user_is_the_callers() {
    // `hpc-model analyze S | hpc-model recommend - --history H`: the record
    // names no user, and every user's jobs of the tool were counted as "of
    // yours" (bob's at 200G beside ana's at 14G).
    let dir = tempfile::tempdir().unwrap();
    let bobs = history(20, 200_000.0)
        .replace(r#""user":"ana""#, r#""user":"bob""#)
        .replace(r#""job_id":""#, r#""job_id":"b"#)
        .replace(r#""job_id_raw":""#, r#""job_id_raw":"b"#);
    let h = write(dir.path(), "h.ndjson", &(history(20, 14000.0) + &bobs));
    let a = analysis(100.0).replace(r#""user":"ana","#, "");
    let out = hpc_testkit::feed(
        TOOL.command(&["recommend", "-", "--history", &h, "--format", "ndjson"])
            .env("USER", "ana")
            .env("HPC_SIZER_DB", "/nonexistent/hpc-sizer.db"),
        a.as_bytes(),
    );
    assert!(out.status.success(), "{}", hpc_testkit::text(&out.stderr));
    let rec = rec_of(&hpc_testkit::text(&out.stdout));
    let mem = rec.mem_mb.unwrap();
    assert!(mem < 50_000.0, "sized from ana's 20 jobs at 14G: {mem}");
}

#[test]
fn a_lower_risk_is_never_given_less() {
    // 30 jobs near 2G and one at 5000M: 1 % was advised 4176M, below the
    // one job (3 % of them) it claimed to cover, and below 20 %'s 5168M.
    let dir = tempfile::tempdir().unwrap();
    let mut h = history(30, 2000.0);
    h.push_str(&job(
        30,
        "COMPLETED",
        5000.0,
        65536.0,
        1000.0,
        16000.0,
        100.0,
    ));
    h.push_str(&history(30, 2000.0).replace(r#""job_id":""#, r#""job_id":"x"#));
    let h = write(dir.path(), "h.ndjson", &h);
    let mem_at = |risk: &str| {
        let (code, out, err) = cli(
            &[
                "recommend",
                "-",
                "--history",
                &h,
                "--risk",
                risk,
                "--format",
                "ndjson",
            ],
            &analysis(100.0),
        );
        assert_eq!(code, 0, "{err}");
        rec_of(&out).mem_mb.unwrap()
    };
    let mems: Vec<f64> = ["0.5", "1", "2", "5", "10", "20"]
        .iter()
        .map(|r| mem_at(r))
        .collect();
    assert!(mems.windows(2).all(|w| w[0] >= w[1]), "{mems:?}");
    assert!(
        mems[1] >= 5000.0,
        "1 % under the largest of 61 jobs: {mems:?}"
    );
}

#[test]
fn a_cold_start_time_from_the_tool_table_is_not_called_requested() {
    // A script that asks for no time limit was told "--time (none) ->
    // 02:00:00: no earlier jobs: as requested".
    let a = analysis(100.0).replace(r#","time_s":7200"#, "");
    let (code, out, err) = cli(&["recommend", "-"], &a);
    assert_eq!(code, 0, "{err}");
    let time = out.lines().find(|l| l.starts_with("--time")).unwrap_or("");
    assert!(!time.contains("as requested"), "{out}");
    assert!(
        time.contains("the tool's usual time (the script asks for none)"),
        "{out}"
    );
}
