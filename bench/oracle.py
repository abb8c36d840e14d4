#!/usr/bin/env python3
"""The best MAQ any per-group log-normal sizing could reach at a stated risk
on the shared traces, knowing every group's mean and spread in hindsight (all
of its jobs, future ones included): the bound the online sizer of hpc-model
(man hpc-model, CALIBRATION) is measured against. Uniform: every job at the
risk; shared: the risk budget shared by expected cost (the mean level kept).

Usage: python3 bench/oracle.py [TRACES]  (default /work/shared/traces)
"""
import collections
import csv
import math
import statistics as st
import sys
from statistics import NormalDist

TRACES = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/traces"
NORMAL = NormalDist()


def mgnify():
    out = []
    for r in csv.DictReader(open(f"{TRACES}/mgnify_metaspades_3.15.3_jobs.csv")):
        try:
            used, runtime = float(r["peak_mem_in_gbs"]) * 1024, float(r["wall_clock_seconds"])
        except ValueError:
            continue
        if used > 0 and runtime > 0:
            out.append((r["lineage"], used, runtime))
    return out


def sap():
    rows = csv.DictReader(open(f"{TRACES}/sap_build_memory.csv"))
    return [(r["group"], float(r["peak_mb"]), 1.0) for r in rows if float(r["peak_mb"]) > 0]


def maq(jobs, alloc):
    """used / (used + over + under), a failed attempt retried at twice."""
    used = over = under = 0.0
    for (_, u, t), a in zip(jobs, alloc):
        a = max(a, 1.0)
        while a < u:
            under += a * t
            a *= 2
        over += (a - u) * t
        used += u * t
    return used / (used + over + under)


def report(name, jobs, risk):
    logs, runs = collections.defaultdict(list), collections.defaultdict(list)
    for g, u, t in jobs:
        logs[g].append(math.log(u))
        runs[g].append(math.log(t))
    fit = {g: (st.mean(v), st.stdev(v) if len(v) > 1 else 0.5) for g, v in logs.items()}

    def at(levels):
        alloc = [math.exp(fit[g][0] + NORMAL.inv_cdf(1 - a) * fit[g][1])
                 for a, (g, _, _) in zip(levels, jobs)]
        miss = sum(a < u for a, (_, u, _) in zip(alloc, jobs)) / len(jobs)
        return miss, maq(jobs, alloc)

    uniform = at([risk] * len(jobs))
    cost = [math.exp(fit[g][0] + st.mean(runs[g])) ** 0.5 for g, _, _ in jobs]
    lo, hi = 1e-12, 1e6
    for _ in range(200):
        s = math.sqrt(lo * hi)
        if sum(min(0.5, s * c) for c in cost) / len(cost) < risk:
            lo = s
        else:
            hi = s
    shared = at([max(1e-6, min(0.5, s * c)) for c in cost])
    print(f"{name:7} risk {risk * 100:4.1f} %  uniform: under {uniform[0] * 100:5.2f} % maq {uniform[1]:.3f}"
          f"   shared by cost: under {shared[0] * 100:5.2f} % maq {shared[1]:.3f}")


for name, jobs in (("mgnify", mgnify()), ("sap", sap())):
    for r in (0.01, 0.02, 0.05):
        report(name, jobs, r)
