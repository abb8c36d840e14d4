#!/usr/bin/env bash
# The project's test command (README): formatting, lints, every crate's
# tests, man page and shell script lints. Installs what it needs on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

need_pkgs=()
command -v mandoc >/dev/null || need_pkgs+=(mandoc)
command -v shellcheck >/dev/null || need_pkgs+=(shellcheck)
command -v python3 >/dev/null || need_pkgs+=(python3)
# The time zone tests need the system's zone database (they fail without it).
[ -e /usr/share/zoneinfo/America/New_York ] || need_pkgs+=(tzdata)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tests/run.sh: installing ${need_pkgs[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    echo "tests/run.sh: missing ${need_pkgs[*]} (install them, or run as root on Debian)" >&2
    exit 1
  fi
fi

step() { printf '\n== %s\n' "$*" >&2; }

step "nothing reads a folder beside the clone (git grep)"
# The tests and benches read their data from the clone (tests/data); .ci/run
# proves it by running in a clone with nothing beside it, and this names the
# line that would reach out.
if git grep -nE '(\.\./|/work/)shared' -- ':!tests/run.sh'; then
  echo "the lines above refer to a folder outside the clone" >&2; exit 1
fi

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

# The tests that need more than their own crate (another tool's binary,
# Python with polars or duckdb) are #[ignore]d, so that `cargo test -p`
# reports them as not run; here everything is built, so they run, and fail
# when what they need is missing.
step "cargo test, the ignored tests (other tools' binaries, a second Parquet reader)"
cargo test --workspace --locked -- --ignored

step "SQLite only in hpc-db, hpc-ingest and hpc-store (cargo tree)"
for c in hpc-core hpc-probe hpc-flags hpc-merge hpc-model hpc-render hpc-plot; do
  if cargo tree --locked -p "$c" | grep -q rusqlite; then echo "$c depends on rusqlite" >&2; exit 1; fi
done

# (hpc-store's Parquet feature brings tokio and hyper with polars' object
# store client: its own, never a server.)
step "the HTTP server stack only in hpc-web (cargo tree)"
for c in hpc-core hpc-db hpc-ingest hpc-store hpc-probe hpc-flags hpc-merge hpc-model hpc-render hpc-plot; do
  stack='axum'
  [ "$c" = hpc-store ] || stack='tokio|hyper|axum'
  if cargo tree --locked -p "$c" -e normal | grep -qE "^[^a-z]*($stack) "; then
    echo "$c depends on the HTTP server stack" >&2; exit 1
  fi
done

step "hpc-store reaches SQLite only through hpc-db (cargo tree)"
if cargo tree --locked -p hpc-store --depth 1 -e normal --prefix none | grep -q '^rusqlite '; then
  echo "hpc-store depends on rusqlite directly: its SQL belongs in hpc-db" >&2; exit 1
fi

step "cargo doc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "man pages (mandoc -T lint)"
for m in man/*.1; do
  mandoc -T lint -W warning "$m"
done

step "shell scripts (shellcheck)"
shellcheck bin-wrappers/* tests/*.sh tests/slurm/*.sh bench/*.sh examples/*.sh

step "every binary has a man page"
for main in crates/*/src/main.rs; do
  bin=$(basename "$(dirname "$(dirname "$main")")")
  [ -f "man/$bin.1" ] || { echo "no man page for $bin" >&2; exit 1; }
done

step "whole tools under faults (tests/faults.sh)"
bash tests/faults.sh

step "the hpc front door without SLURM (tests/hpc.sh)"
bash tests/hpc.sh

step "hpc-plot html in headless Chromium (tests/plot_chromium.sh)"
bash tests/plot_chromium.sh

step "hpc-web's pages in headless Chromium (tests/web_chromium.sh)"
bash tests/web_chromium.sh

# The real-SLURM scripts need root and apt (each installs the packages,
# starts a cluster of its own, HPC_TEST_NODES nodes (default 3) on this
# machine, under /var/lib/hpc-sizer-slurm beside, never instead of, any
# SLURM of the machine's own, then stops it); exit 77
# means it cannot run here. HPC_SKIP_SLURM=1 skips them.
slurm_script() {
  step "real SLURM: $1"
  if [ "${HPC_SKIP_SLURM:-0}" = 1 ]; then
    echo "skipped: HPC_SKIP_SLURM=1" >&2
    return
  fi
  local log rc
  log=$(mktemp)
  set +e
  bash "$1" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -eq 77 ]; then
    echo "skipped: $(tail -n 1 "$log")" >&2
  fi
  rm -f "$log"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    echo "$1 failed (exit $rc)" >&2
    exit 1
  fi
}
slurm_script tests/slurm/run.sh
slurm_script tests/slurm/pool.sh
slurm_script tests/slurm/flow.sh
slurm_script tests/slurm/multinode.sh
slurm_script tests/slurm/gres.sh
slurm_script tests/slurm/churn_cgroup.sh

echo "tests/run.sh: all checks passed" >&2
