#!/usr/bin/env python3
"""The best MAQ any per-group log-normal sizing could reach at a stated risk
on the real traces (tests/data/traces), knowing every group's mean and spread in hindsight (all
of its jobs, future ones included): the bound the online sizer of hpc-model
(man hpc-model, CALIBRATION) is measured against. Uniform: every job at the
risk; shared: the risk budget shared by expected cost (the mean level kept);
priced: every job sized where one more unit of risk saves the same
memory-time (the sizer's rule), the one price chosen so that the share that
runs out is the risk. On SAP (half of its groups have at most 3 jobs) a
fit that includes the job itself is no bound an online sizer can approach;
the last rows are: each job's centre from its group's earlier jobs only
(out of sample), with only the one price chosen in hindsight, beside
p95 x 1.2 on the same warm jobs.

With --alone CSV K (a trace of one group as gen_trace writes it): the best
one value for all of its warm jobs (every job but the first, which runs at
its request as in the backtest) that runs out on at most K of them, rounded
up to the backtest's 16 MiB step, and its MAQ: in hindsight, what any sizing
that gives every job the same value could reach at K misses. bench/model.sh
sets K to p95 x 1.2's misses on one loose group alone. With K0 K1 after K
(the misses of our two curve points around K), also that best value's MAQ
at K0 and at K1, interpolated at K as the equal footing interpolates ours:
what a curve of points each at the best in hindsight would be credited with
at K.

Usage: python3 bench/oracle.py [TRACES]  (default tests/data/traces of this clone)
       python3 bench/oracle.py --alone CSV K
"""
import collections
import csv
import math
import os
import statistics as st
import sys
from statistics import NormalDist

ALONE = sys.argv[1:2] == ["--alone"]
TRACES = sys.argv[1] if len(sys.argv) > 1 and not ALONE else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "traces")
NORMAL = NormalDist()


def mgnify():
    """The jobs in accession order (the order they ran in)."""
    out = []
    rows = csv.DictReader(open(f"{TRACES}/mgnify_metaspades_3.15.3_jobs.csv"))
    for r in sorted(rows, key=lambda r: int(r["primary_accession"][3:])):
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


def score_at_price(log_cost, sd, t):
    """The z >= 0 at which a job's price, ln C + ln s + ln sqrt(2 pi) + s z +
    z^2 / 2, is t (0 when it is above t at z = 0)."""
    d = t - (log_cost + math.log(sd) + 0.9189)
    return math.sqrt(sd * sd + 2 * d) - sd if d > 0 else 0.0


def solve_price(priced, risk):
    """The least price whose sizing runs out on at most `risk` of the jobs
    (priced(t) gives (share run out, maq))."""
    lo, hi = -50.0, 100.0
    for _ in range(60):
        t = (lo + hi) / 2
        if priced(t)[0] > risk:
            lo = t
        else:
            hi = t
    got = priced(hi)
    if got[0] > risk:
        print(f"oracle.py: no price keeps the share run out at {risk}", file=sys.stderr)
    return got


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

    run = {g: st.mean(v) for g, v in runs.items()}

    def priced(t):
        out = []
        for g, _, _ in jobs:
            mean, sd = fit[g]
            z = score_at_price(mean + run[g], max(sd, 0.05), t)  # sd 0: any z fits
            out.append(min(0.5, max(1e-12, 1 - NORMAL.cdf(z))))
        return at(out)

    price = solve_price(priced, risk)
    print(f"{name:7} risk {risk * 100:4.1f} %  uniform: under {uniform[0] * 100:5.2f} % maq {uniform[1]:.3f}"
          f"   shared by cost: under {shared[0] * 100:5.2f} % maq {shared[1]:.3f}"
          f"   priced: under {price[0] * 100:5.2f} % maq {price[1]:.3f}")


def alone(path, misses, step=16.0):
    """The MAQ of the least value, a whole `step`, that runs out on at most
    `misses` of the trace's warm jobs (all but the first), the first job at
    its request."""
    rows = list(csv.DictReader(open(path)))
    jobs = [(None, float(r["used_mb"]), float(r["runtime_s"])) for r in rows]
    first = float(rows[0]["request_mb"])
    warm = sorted((u for _, u, _ in jobs[1:]), reverse=True)
    need = warm[misses] if misses < len(warm) else 0.0
    value = math.ceil(need / step - 1e-9) * step
    # A value at a whole step may also cover some of the `misses` largest.
    ran_out = sum(u > value for u in warm)
    return ran_out, maq(jobs, [first] + [value] * (len(jobs) - 1))


if ALONE:
    k = int(sys.argv[3])
    ran_out, best = alone(sys.argv[2], k)
    line = f"{ran_out} {best:.3f}"
    if len(sys.argv) > 5:
        k0, k1 = int(sys.argv[4]), int(sys.argv[5])
        m0, m1 = alone(sys.argv[2], k0)[1], alone(sys.argv[2], k1)[1]
        line += f" {m0 + (m1 - m0) * (k - k0) / (k1 - k0) if k1 > k0 else max(m0, m1):.3f}"
    print(line)
    sys.exit(0)

for name, jobs in (("mgnify", mgnify()), ("sap", sap())):
    for r in (0.01, 0.02, 0.05):
        report(name, jobs, r)


def online(name, jobs, risk):
    """Out of sample: each job's centre is the mean log of its group's earlier
    jobs and its spread the root mean square of all earlier residuals; only
    the one price is chosen in hindsight. Jobs with no earlier job in their
    group are left out, for both this and p95 x 1.2 (the same warm jobs)."""
    seen, runs = collections.defaultdict(list), collections.defaultdict(list)
    resid, preds, p95 = [], [], []
    for g, u, t in jobs:
        h = seen[g]
        if h and len(resid) >= 10:
            rms = math.sqrt(sum(r * r for r in resid) / len(resid))
            cost = st.mean(h) + st.mean(runs[g])
            preds.append((st.mean(h), max(rms, 0.05), cost, u, t))
            s = sorted(h)
            p95.append((1.2 * math.exp(s[min(len(s) - 1, int(0.95 * len(s)))]), u, t))
        if h:
            resid.append(math.log(u) - st.mean(h))
        h.append(math.log(u))
        runs[g].append(math.log(t))

    def score(alloc):
        warm = [(None, u, t) for _, _, _, u, t in preds]
        miss = sum(a < u for a, (_, u, _) in zip(alloc, warm)) / len(warm)
        return miss, maq(warm, alloc)

    def priced(t):
        return score([math.exp(mean + sd * score_at_price(cost, sd, t))
                      for mean, sd, cost, _, _ in preds])

    got = solve_price(priced, risk)
    base = score([a for a, _, _ in p95])
    print(f"{name:7} warm jobs, out-of-sample centre, price in hindsight at {risk * 100:4.1f} %:"
          f" under {got[0] * 100:5.2f} % maq {got[1]:.3f}   p95x1.2: under {base[0] * 100:5.2f} % maq {base[1]:.3f}")


for name, jobs in (("mgnify", mgnify()), ("sap", sap())):
    for r in (0.01, 0.02):
        online(name, jobs, r)
