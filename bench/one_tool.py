#!/usr/bin/env python3
"""One tool's history (issue 28): each real trace's three costliest groups
(memory x runtime summed; builds weigh 1) replayed alone by
`hpc-model backtest`, with the 1 % rule (warm under-share at most 2 %, and a
MAQ at least p95 x 1.2's wherever p95 x 1.2 runs out on at most 2 %) and
max so far beside it, then the equal footing: over the curve of risks 1-20 %,
our MAQ at each baseline's under-share (backtest's own comparison).

Usage: python3 bench/one_tool.py HPC_MODEL [TRACES]  (default tests/data/traces)
"""
import collections
import csv
import json
import os
import subprocess
import sys
import tempfile

MODEL = sys.argv[1]
TRACES = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "traces")


def path(name):
    return os.path.join(TRACES, name)


# name: file, group column, used column, runtime column, the mapping.
TRACE = {
    "MGnify": ("mgnify_metaspades_3.15.3_jobs.csv", "lineage", "peak_mem_in_gbs",
               "wall_clock_seconds", ["--mgnify", path("mgnify_memory_heuristics.tsv")]),
    "SAP": ("sap_build_memory.csv", "group", "peak_mb", None,
            ["--group", "group", "--used", "peak_mb", "--request", "request_mb", "--order", "order"]),
    "bwa": ("wfcommons_makeflow_bwa.csv", "process", "used_mb", "runtime_s",
            ["--group", "process", "--used", "used_mb", "--runtime", "runtime_s", "--order", "order",
                 "--input", "input_mb"]),
    "montage": ("wfcommons_pegasus_montage.csv", "process", "used_mb", "runtime_s",
                ["--group", "process", "--used", "used_mb", "--runtime", "runtime_s", "--order", "order",
                 "--input", "input_mb"]),
}


def num(text):
    try:
        return float(text)
    except ValueError:
        return 0.0


CURVE = "1,2,3,5,10,15,20"


def footing(alone, mapping):
    """Backtest's equal-footing lines: (baseline, its MAQ, ours there, held)."""
    out = subprocess.run([MODEL, "backtest", "--csv", alone, *mapping, "--risks", CURVE],
                         capture_output=True, text=True, check=True).stdout
    lines = out.split("equal footing:", 1)[1].splitlines()[1:]
    rows = [l.split() for l in lines if l.strip()]
    return [(r[0], float(r[3]), float(r[6]), r[7] == "ours") for r in rows if len(r) >= 8]


held = total = even = evens = 0
short_footing = []
with tempfile.TemporaryDirectory() as tmp:
    for name, (file, group, used, runtime, mapping) in TRACE.items():
        with open(path(file), newline="") as f:
            rows = list(csv.DictReader(f))
        cost = collections.Counter()
        for r in rows:
            cost[r[group]] += num(r[used]) * (num(r[runtime]) if runtime else 1.0)
        for key, _ in cost.most_common(3):
            alone = os.path.join(tmp, "alone.csv")
            with open(alone, "w", newline="") as o:
                w = csv.DictWriter(o, fieldnames=list(rows[0].keys()))
                w.writeheader()
                w.writerows(r for r in rows if r[group] == key)
            out = subprocess.run([MODEL, "backtest", "--csv", alone, *mapping, "--risks", "1",
                                  "--format", "ndjson"], capture_output=True, text=True, check=True)
            recs = {r["policy"]: r for r in map(json.loads, out.stdout.splitlines())}
            ours, p95, top = recs["ours"], recs["p95x1.2"], recs["max"]
            ok = ours["warm_under_share"] <= 0.02 and (
                p95["warm_under_share"] > 0.02 or ours["maq"] >= p95["maq"] - 1e-9)
            held += ok
            total += 1
            for base, maq, there, won in footing(alone, mapping):
                evens += 1
                even += won
                if not won:
                    short_footing.append(f"{name} {key[:44]}: {base} {maq:.3f}, ours there {there:.3f}")
            print(f"{name:8s} {key[:44]:44s} {ours['jobs']:6d} jobs  ours 1 %: "
                  f"{ours['warm_under_share'] * 100:5.2f} % / {ours['maq']:.3f}  p95x1.2 "
                  f"{p95['warm_under_share'] * 100:5.2f} % / {p95['maq']:.3f}  max "
                  f"{top['warm_under_share'] * 100:5.2f} % / {top['maq']:.3f}  {'ok' if ok else 'short'}")
print(f"the 1 % rule holds on {held} of {total} groups replayed alone")
for line in short_footing:
    print(f"  short at equal footing: {line}")
print(f"equal footing holds on {even} of {evens} comparisons (3 baselines a group)")
