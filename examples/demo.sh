#!/usr/bin/env bash
# The hpc-sizer demo: builds the tools and runs the main flow on the bundled
# examples with the embedded defaults (the database and spool live under
# $XDG_DATA_HOME/hpc-sizer/; the demo points XDG_DATA_HOME at a scratch
# folder so your real history is not touched: set DEMO_DATA to keep it).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
# hpc-store without its Parquet feature: polars takes long to compile and the
# demo does not need it (`cargo build --release` builds everything).
cargo build --release --quiet --no-default-features \
  -p hpc-ingest -p hpc-store -p hpc-probe -p hpc-merge -p hpc-flags -p hpc-model -p hpc-plot
bin="$CARGO_TARGET_DIR/release"
export PATH="$bin:$PWD/bin-wrappers:$PATH"

data="${DEMO_DATA:-$(mktemp -d)}"
export XDG_DATA_HOME="$data"
unset HPC_SIZER_DB HPC_SIZER_SPOOL
umask 077

say() { printf '\n### %s\n' "$*"; }

say "1. Keep sacct history: real sacct -P output of a local SLURM 22.05"
hpc-ingest --utc examples/sacct-sample.txt
hpc-store status

say "2. The jobs as records (first two)"
hpc-store dump --kind job | head -n 2

say "3. Flag the archive from sacct data alone, keep the flags, report"
hpc-store dump --kind job | hpc-flags | tee "$data/flagged.ndjson" | grep '"kind":"flag"' | head -n 3
hpc-store put "$data/flagged.ndjson"
hpc-store flags
hpc-store report --by user
hpc-store report --by state --format md

say "4. Profile a real command: 3 s of work holding about 200 MB"
run="$data/run.ndjson"
hpc-probe --out "$run" -- python3 -c '
import time
block = bytearray(200 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.time() + 3
while time.time() < end:
    pass
'
echo "samples: $(grep -c '"kind":"sample"' "$run")"

say "5. Merge, flag, store"
hpc-merge "$run" | hpc-flags | tee "$data/job.ndjson" | grep -E '"kind":"(summary|flag)"' | head -n 5
grep -v '"kind":"sample"' "$data/job.ndjson" | hpc-store put

say "6. Draw the probe run and write the HTML report of the database"
hpc-plot job -o "$data/run.png" "$run"
hpc-plot job --format txt --width 60 "$run"
(hpc-store report --format ndjson --by user; hpc-store report --format ndjson --by partition
 hpc-store dump --kind job,flag,summary) | hpc-plot html --out "$data/report"
echo "The probe run's plot: $data/run.png"
echo "The HTML report: $data/report/index.html"

say "7. What a batch script asks for and runs (static: nothing is run), and the advice"
hpc-model analyze examples/seurat.sbatch
echo "# no history yet: the cold-start heuristic keeps the request"
hpc-model recommend examples/seurat.sbatch --history /dev/null --format text
echo "# with 12 earlier Seurat jobs of the user in the database (examples/seurat-history.ndjson)"
hpc-store put examples/seurat-history.ndjson
hpc-store dump --kind job,other --user ana |
  hpc-model recommend examples/seurat.sbatch --history - --format text
hpc-store dump --kind job,other --user ana |
  hpc-model recommend examples/seurat.sbatch --history - --format sbatch

say "8. How many jobs two accounts can run at once (recorded sacctmgr output)"
pool=crates/hpc-model/tests/fixtures/pool
hpc-model pool --assoc "$pool/assoc.txt" --qos "$pool/qos.txt" --partitions "$pool/partitions.txt" \
  --usage "$pool/queue-empty.txt" --user ana --gpu-job cpus=8,mem=180G,gpus=1 --cpu-job cpus=8,mem=48G

say "Done. The demo database is $data/hpc-sizer/hpc-sizer.db"
