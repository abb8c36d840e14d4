//! hpc-model analyze end to end: the real binary on real script files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hpc_testkit::{feed, show, text, Tool};
use serde_json::{json, Value};

const TOOL: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-model"));

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Runs `hpc-model analyze ARGS` in `cwd`.
fn run_in(cwd: &Path, args: &[&str]) -> Output {
    TOOL.command(&["analyze"])
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

/// The one analysis record of a successful run.
fn record(out: &Output) -> Value {
    assert!(out.status.success(), "{}", show(out));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with(r#"{"kind":"analysis","#), "{stdout}");
    serde_json::from_str(&stdout).unwrap()
}

/// Writes `body` as `name` in `dir` and analyzes it from `dir`.
fn analyze_text(dir: &Path, name: &str, body: &str) -> Value {
    std::fs::write(dir.join(name), body).unwrap();
    record(&run_in(dir, &[name]))
}

#[test]
fn the_seurat_fixture_is_r_with_seurat_sctransform_and_findmarkers() {
    let path = fixture("sample_seurat.sbatch");
    let out = run_in(Path::new("."), &[path.to_str().unwrap()]);
    let a = record(&out);
    assert_eq!(a["language"], "R");
    assert_eq!(a["tools"], json!(["seurat", "sctransform", "findmarkers"]));
    assert_eq!(a["tool"], "seurat");
    assert_eq!(
        a["request"],
        json!({"mem_mb": 262144.0, "cpus": 8, "time_s": 43200.0, "job_name": "seurat_test"})
    );
    // saveRDS(obj, "output.rds") writes: it is not an input.
    assert_eq!(a["inputs"], json!([]));
    assert!(a.get("input_mb").is_none(), "{a}");
    assert_eq!(a["script"], path.to_str().unwrap());
    // The hash is the one sha256sum gives for the same bytes.
    let sum = Command::new("sha256sum").arg(&path).output().unwrap();
    let hex = text(&sum.stdout);
    assert_eq!(a["script_sha256"], hex.split_whitespace().next().unwrap());
}

#[test]
fn every_directive_form() {
    let cases: &[(&str, Value)] = &[
        ("--mem=4G", json!({"mem_mb": 4096.0})),
        ("--mem 4G", json!({"mem_mb": 4096.0})),
        ("--mem=4000", json!({"mem_mb": 4000.0})),
        // sbatch counts whole MiB, K rounded up (str_to_mbytes).
        ("--mem=512K", json!({"mem_mb": 1.0})),
        ("--mem=4GB", json!({"mem_mb": 4096.0})),
        ("--mem=1T", json!({"mem_mb": 1048576.0})),
        ("--mem=4G -N 2", json!({"mem_mb": 8192.0, "nodes": 2})),
        ("--mem=0", json!({})),
        (
            "--mem-per-cpu=2G -c 4",
            json!({"mem_mb": 8192.0, "cpus": 4}),
        ),
        (
            "--mem-per-cpu=2G -n 2 -c 4",
            json!({"mem_mb": 16384.0, "cpus": 8, "ntasks": 2}),
        ),
        ("--mem-per-cpu 1500", json!({"mem_mb": 1500.0})),
        (
            "--mem-per-gpu=10G --gpus=2",
            json!({"mem_mb": 20480.0, "gpus": 2}),
        ),
        ("-c 8", json!({"cpus": 8})),
        ("-c8", json!({"cpus": 8})),
        ("--cpus-per-task=8", json!({"cpus": 8})),
        ("--cpus-per-task 8", json!({"cpus": 8})),
        ("-n 4", json!({"cpus": 4, "ntasks": 4})),
        ("--ntasks=4", json!({"cpus": 4, "ntasks": 4})),
        (
            "--ntasks-per-node=4 -N 2",
            json!({"cpus": 8, "ntasks": 8, "nodes": 2}),
        ),
        ("-N 2", json!({"nodes": 2})),
        ("--nodes=2-4", json!({"nodes": 2})),
        ("-t 30", json!({"time_s": 1800.0})),
        // Whole minutes, seconds rounded up, as sbatch reads a limit
        // (time_str2mins).
        ("-t 30:15", json!({"time_s": 1860.0})),
        ("-t 1:30", json!({"time_s": 120.0})),
        ("-t 2-", json!({"time_s": 172800.0})),
        ("-t unlimited", json!({})),
        ("-t -1", json!({})),
        ("--time=12:00:00", json!({"time_s": 43200.0})),
        ("--time 1-0", json!({"time_s": 86400.0})),
        ("-t 2-12", json!({"time_s": 216000.0})),
        ("-t 1-2:30", json!({"time_s": 95400.0})),
        ("-t 1-02:30:15", json!({"time_s": 95460.0})),
        ("--time=UNLIMITED", json!({})),
        ("--time=0", json!({})),
        ("--gres=gpu:a100:2", json!({"gpus": 2, "gpu_type": "a100"})),
        ("--gres=gpu:2 -N 2", json!({"gpus": 4, "nodes": 2})),
        ("--gres=gpu", json!({"gpus": 1})),
        ("--gres=shard:2", json!({})),
        ("--gpus=a100:3", json!({"gpus": 3, "gpu_type": "a100"})),
        ("-G 2", json!({"gpus": 2})),
        (
            "--gpus-per-node=h100:2 -N 3",
            json!({"gpus": 6, "gpu_type": "h100", "nodes": 3}),
        ),
        (
            "--gpus-per-task=1 -n 4",
            json!({"gpus": 4, "cpus": 4, "ntasks": 4}),
        ),
        ("--array=1-10%2", json!({"array": "1-10%2"})),
        ("-a 0-3", json!({"array": "0-3"})),
        ("-p gpu", json!({"partition": "gpu"})),
        ("--partition=gpu", json!({"partition": "gpu"})),
        ("-A proj1", json!({"account": "proj1"})),
        ("--account proj1", json!({"account": "proj1"})),
        ("--qos=high", json!({"qos": "high"})),
        ("-q low", json!({"qos": "low"})),
        ("-J align", json!({"job_name": "align"})),
        (r#"--job-name="my job""#, json!({"job_name": "my job"})),
        ("--mem=1G # was 64G", json!({"mem_mb": 1024.0})),
        ("--output=%x.log --mail-type=END -c 2", json!({"cpus": 2})),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (directive, want) in cases {
        let a = analyze_text(
            dir.path(),
            "job.sbatch",
            &format!("#!/bin/bash\n#SBATCH {directive}\necho done\n"),
        );
        assert_eq!(&a["request"], want, "#SBATCH {directive}");
    }
    // The old #SLURM prefix is read too; a repeated option: the last wins.
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/sh\n#SLURM -c 2\n#SBATCH -c 3\n#SBATCH -p a\n#SBATCH -p b\n",
    );
    assert_eq!(a["request"], json!({"cpus": 3, "partition": "b"}));
}

#[test]
fn directives_after_the_first_command_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/bash\n\n# a comment\n#SBATCH -c 2\n   # indented comment\n\
         # SBATCH --mem=1G\n ##SBATCH -p off\n\
         #SBATCH -t 10\ncd $HOME\n#SBATCH -c 8\n#SBATCH --mem=100G\n",
    );
    assert_eq!(a["request"], json!({"cpus": 2, "time_s": 600.0}));
}

#[test]
fn a_bad_directive_value_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    for (directive, reason) in [
        ("--time=abc", "--time 'abc': not a time limit"),
        // What sbatch refuses is refused: a fraction, a word, a unit it
        // does not know.
        ("-t 10.5", "-t '10.5': not a time limit"),
        (
            "-t Partition_Limit",
            "-t 'Partition_Limit': not a time limit",
        ),
        // A field without digits (SLURM wants digits on each side of a
        // colon).
        ("-t 5:", "-t '5:': not a time limit"),
        ("-t :30", "-t ':30': not a time limit"),
        ("-t 1-:", "-t '1-:': not a time limit"),
        ("-t ::", "-t '::': not a time limit"),
        ("--mem=4X", "--mem '4X': not a memory size"),
        ("--mem=1.5G", "--mem '1.5G': not a memory size"),
        ("--mem=1P", "--mem '1P': not a memory size"),
        ("-c 0", "-c '0': not a positive count"),
        ("--cpus-per-task=two", "--cpus-per-task 'two': not a count"),
        ("--gres=gpu:a100:x", "--gres 'gpu:a100:x'"),
        ("--mem", "--mem: needs a value"),
    ] {
        std::fs::write(
            dir.path().join("bad.sbatch"),
            format!("#!/bin/bash\n#SBATCH -c 1\n#SBATCH {directive}\n"),
        )
        .unwrap();
        let out = run_in(dir.path(), &["bad.sbatch"]);
        assert_eq!(out.status.code(), Some(1), "{directive}");
        assert!(out.stdout.is_empty());
        let err = text(&out.stderr);
        assert!(
            err.starts_with("hpc-model: bad.sbatch: line 3: ") && err.contains(reason),
            "{directive}: {err}"
        );
    }
}

#[test]
fn the_language_table() {
    let cases = [
        ("#!/bin/bash\nmodule load R/4.3\nRscript run.R\n", "R"),
        ("#!/bin/bash\nR CMD BATCH run.R\n", "R"),
        ("#!/usr/bin/env Rscript\nlibrary(Seurat)\n", "R"),
        ("#!/usr/bin/env python3\nimport scanpy\n", "Python"),
        ("#!/bin/bash\nsrun python3.11 -u train.py\n", "Python"),
        (
            "#!/bin/bash\nmodule load Python/3.11.3-GCCcore-12.3.0\n./train.py\n",
            "Python",
        ),
        (
            "#!/bin/bash\nmodule load anaconda3\nsource activate env\n",
            "Python",
        ),
        ("#!/bin/bash\njulia --threads 4 sim.jl\n", "Julia"),
        ("#!/bin/bash\n./sim.jl\n", "Julia"),
        (
            "#!/bin/bash\nmodule load MATLAB/R2023b\nmatlab -batch run_all\n",
            "MATLAB",
        ),
        ("#!/bin/bash\nperl count.pl\n", "Perl"),
        ("#!/bin/bash\necho hello\n", "bash"),
        ("#!/bin/sh\nsleep 1\n", "bash"),
        // No shebang: the tool's language.
        ("STAR --runThreadN 8 --genomeDir idx\n", "bash"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (script, want) in cases {
        let a = analyze_text(dir.path(), "job.sbatch", script);
        assert_eq!(a["language"], want, "{script}");
    }
    let a = analyze_text(dir.path(), "job.sbatch", "echo hello\n");
    assert!(a.get("language").is_none(), "{a}");
}

#[test]
fn the_tool_table() {
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "STAR --genomeDir idx --readFilesIn r1.fq\nsamtools index out.bam\n",
            &["star", "samtools"],
            "star",
        ),
        ("samtools sort -@ 4 in.bam\n", &["samtools"], "samtools"),
        ("bwa mem ref.fa r1.fq r2.fq\n", &["bwa"], "bwa"),
        ("bwa-mem2 mem ref.fa r1.fq\n", &["bwa"], "bwa"),
        (
            "gatk --java-options -Xmx4g HaplotypeCaller -I a.bam\n",
            &["gatk"],
            "gatk",
        ),
        (
            "module load cellranger/7.1.0\ncellranger count --id=s1\n",
            &["cellranger"],
            "cellranger",
        ),
        (
            "QuPath script -i slide.svs detect.groovy\n",
            &["qupath"],
            "qupath",
        ),
        (
            "python -c 'import scanpy as sc; sc.pp.neighbors(a)'\n",
            &["scanpy"],
            "scanpy",
        ),
        (
            "Rscript -e 'x <- SCTransform(readRDS(\"a.rds\"))'\n",
            &["sctransform"],
            "seurat",
        ),
        // Names in comments and inside longer words are not tools.
        ("# STAR and samtools later\necho START\n", &[], "generic"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (body, tools, tool) in cases {
        let a = analyze_text(dir.path(), "job.sbatch", &format!("#!/bin/bash\n{body}"));
        assert_eq!(a["tools"], json!(tools), "{body}");
        assert_eq!(a["tool"], *tool, "{body}");
    }
}

#[test]
fn a_script_with_no_known_tool_is_generic() {
    let dir = tempfile::tempdir().unwrap();
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/bash\n#SBATCH -c 1\n./my_own_program --fast\n",
    );
    assert_eq!(a["tools"], json!([]));
    assert_eq!(a["tool"], "generic");
    assert_eq!(a["language"], "bash");
}

#[test]
fn a_user_tool_file_extends_and_replaces() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("db.k2d"), vec![0u8; 2 << 20]).unwrap();
    std::fs::write(
        dir.path().join("job.sbatch"),
        "#!/bin/bash\nkraken2 --db db.k2d reads.fq.gz\nSTARsolo --x 1\n",
    )
    .unwrap();
    let user = fixture("user-tools.csv");
    let a = record(&run_in(
        dir.path(),
        &["--tools", user.to_str().unwrap(), "job.sbatch"],
    ));
    assert_eq!(a["tools"], json!(["kraken2", "star"]));
    // kraken2 (64 GiB) is heavier than the user's STAR (40000 MiB).
    assert_eq!(a["tool"], "kraken2");
    assert_eq!(
        a["inputs"],
        json!([
            {"path": "db.k2d", "size_mb": 2.0, "type": "k2d", "mem_factor": 1.0},
            {"path": "reads.fq.gz", "type": "fastq", "mem_factor": 0.0},
        ])
    );
    // Without the user file neither kraken2 nor STARsolo is known.
    let a = record(&run_in(dir.path(), &["job.sbatch"]));
    assert_eq!(a["tools"], json!([]));

    // A bad user file names its line; a missing one is named.
    std::fs::write(
        dir.path().join("bad.csv"),
        "kind,name,base_mem_mb\ntool,ok,10\ntool,broken,lots\n",
    )
    .unwrap();
    let out = run_in(dir.path(), &["--tools", "bad.csv", "job.sbatch"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("bad.csv: line 3"), "{err}");
    let out = run_in(dir.path(), &["--tools", "none.csv", "job.sbatch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read none.csv"));
}

#[test]
fn the_script_it_runs_is_read_from_the_batch_folder_or_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::write(
        jobs.join("job.sbatch"),
        "#!/bin/bash\n#SBATCH --mem=8G\nmodule load R\nRscript analysis.R pbmc.rds\n",
    )
    .unwrap();
    std::fs::write(
        jobs.join("analysis.R"),
        "# reads the object, finds markers\nlibrary(Seurat)\n\
         obj <- readRDS(commandArgs(TRUE)[1])\nm <- FindMarkers(obj, ident.1 = 1)\n\
         extra <- read.csv(\"meta.csv\")\nwrite.csv(m, \"markers.csv\")\n",
    )
    .unwrap();
    std::fs::write(jobs.join("pbmc.rds"), vec![1u8; 1 << 20]).unwrap();
    // Run from the parent: the R script and the inputs are found beside the
    // batch script.
    let a = record(&run_in(dir.path(), &["jobs/job.sbatch"]));
    assert_eq!(a["language"], "R");
    assert_eq!(a["tools"], json!(["seurat", "findmarkers"]));
    assert_eq!(
        a["inputs"],
        json!([
            {"path": "pbmc.rds", "size_mb": 1.0, "type": "rds", "mem_factor": 2.5},
            {"path": "meta.csv", "type": "csv", "mem_factor": 2.0},
        ])
    );
    assert_eq!(a["input_mb"], 1.0);

    // From the cwd: the batch script elsewhere, the R script here.
    let other = tempfile::tempdir().unwrap();
    std::fs::rename(jobs.join("analysis.R"), other.path().join("analysis.R")).unwrap();
    let batch = jobs.join("job.sbatch");
    let a = record(&run_in(other.path(), &[batch.to_str().unwrap()]));
    assert_eq!(a["tools"], json!(["seurat", "findmarkers"]));

    // Unreadable (absent) script: the batch script alone.
    std::fs::remove_file(other.path().join("analysis.R")).unwrap();
    let a = record(&run_in(other.path(), &[batch.to_str().unwrap()]));
    assert_eq!(a["tools"], json!([]));
    assert_eq!(a["language"], "R");
}

#[test]
fn inputs_that_do_not_exist_have_no_size() {
    let dir = tempfile::tempdir().unwrap();
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/bash\nSTAR --readFilesIn missing_R1.fastq.gz $DATA/r2.fastq.gz\n\
         python -c 'import scanpy as sc; a = sc.read_h5ad(\"/no/such/x.h5ad\")'\n",
    );
    assert_eq!(
        a["inputs"],
        json!([
            {"path": "missing_R1.fastq.gz", "type": "fastq", "mem_factor": 0.0},
            {"path": "$DATA/r2.fastq.gz", "type": "fastq", "mem_factor": 0.0},
            {"path": "/no/such/x.h5ad", "type": "h5ad", "mem_factor": 1.5},
        ])
    );
    assert!(a.get("input_mb").is_none(), "{a}");
}

#[test]
fn large_inputs_are_sized_by_stat_without_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse 64 GiB file: reading it would take minutes, stat is instant.
    let f = std::fs::File::create(dir.path().join("big.h5ad")).unwrap();
    f.set_len(64 << 30).unwrap();
    let t = std::time::Instant::now();
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/bash\npython -c 'import scanpy; scanpy.read_h5ad(\"big.h5ad\")'\n",
    );
    assert!(t.elapsed().as_secs() < 5);
    assert_eq!(a["inputs"][0]["size_mb"], 65536.0);
    assert_eq!(a["input_mb"], 65536.0);
}

#[test]
fn outputs_are_not_inputs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.bam"), b"x").unwrap();
    std::fs::write(dir.path().join("old.sam"), b"x").unwrap();
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/bash\nsamtools sort -o sorted.bam in.bam\nsamtools view in.bam > old.sam\n\
         STAR --outFileNamePrefix run1.bam\n",
    );
    let paths: Vec<&str> = a["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["in.bam"]);
}

#[test]
fn analyze_never_runs_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let a = analyze_text(
        dir.path(),
        "job.sbatch",
        "#!/bin/bash\ntouch ran.marker\nRscript -e 'file.create(\"ran2.marker\")'\n",
    );
    assert_eq!(a["language"], "R");
    assert!(!dir.path().join("ran.marker").exists());
    assert!(!dir.path().join("ran2.marker").exists());
}

#[test]
fn a_missing_or_unreadable_script_exits_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["nope.sbatch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(err.contains("cannot read nope.sbatch"), "{err}");
    let out = run_in(dir.path(), &["."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a regular file"));
    // A name with a control character is shown escaped.
    let out = run_in(dir.path(), &["a\x1bb"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("a\\u{1b}b"),
        "{}",
        text(&out.stderr)
    );
    // No script at all: usage.
    let out = run_in(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_matches_the_man_page() {
    let mut n = 0;
    for sub in [&[][..], &["analyze"][..]] {
        let flags = TOOL.assert_help_in_man(&TOOL.help(sub));
        n += flags.iter().filter(|f| *f != "help").count();
    }
    assert!(n >= 1);
}

#[test]
fn the_man_page_lists_the_builtin_table_as_it_is() {
    let man = TOOL.man_page();
    let table = hpc_model::tools::ToolTable::builtin();
    for t in table.tools() {
        let want = format!(
            "{} {} {} {}",
            t.name,
            t.base_mem_mb,
            t.cpus.unwrap(),
            t.time_s.unwrap()
        );
        assert!(
            man.lines()
                .any(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" ") == want),
            "man page lacks the row {want}"
        );
    }
    for name in ["rds", "h5ad", "fastq", "image"] {
        let ty = table.file_type(&format!("x.{}", if name == "image" { "svs" } else { name }));
        let ty = ty.unwrap();
        let exts = ty.extensions.join(" ");
        let want = format!("{} {} {}", ty.name, exts, ty.mem_factor);
        assert!(
            man.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == want),
            "man page lacks the row {want}"
        );
    }
}

#[test]
fn a_script_on_a_pipe_is_read_and_a_fifo_it_names_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    // A FIFO named as the script to run: opening it would block for ever.
    let fifo = dir.path().join("stuck.R");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let body = b"#!/bin/bash\n#SBATCH -c 2\n# caf\xe9 (not UTF-8)\nRscript stuck.R\n";
    let out = feed(
        TOOL.command(&["analyze", "/dev/stdin"])
            .current_dir(dir.path()),
        body,
    );
    let a = record(&out);
    assert_eq!(a["request"], json!({"cpus": 2}));
    assert_eq!(a["language"], "R");
    // The hash is over the bytes as they are.
    let hex = text(&feed(&mut Command::new("sha256sum"), body).stdout);
    assert_eq!(a["script_sha256"], hex.split_whitespace().next().unwrap());
}

#[test]
fn a_script_over_4_mib_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = b"#!/bin/bash\n".to_vec();
    body.resize((4 << 20) + 1, b'#');
    std::fs::write(dir.path().join("huge.sbatch"), body).unwrap();
    let out = run_in(dir.path(), &["huge.sbatch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("larger than"),
        "{}",
        text(&out.stderr)
    );
}
