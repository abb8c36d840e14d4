#!/usr/bin/env python3
"""Times slurm-usage's own sacct parsing on a file from sacct_remap.py.

    slurm_usage_parse.py FILE

FILE holds what slurm-usage's `sacct ... --format=<RawJobRecord fields> -P -n`
would print: no header, '|'-separated, the 61 RawJobRecord fields in order
(see sacct_remap.py for how our columns are mapped and which stay empty).

Timed, as slurm_usage._fetch_raw_records_from_slurm and _fetch_jobs_for_date
do it: split the text into lines, RawJobRecord.from_sacct_line(line, fields)
for each (pydantic model per line, steps included), then
_process_raw_records_into_jobs(records), which keeps main jobs and .batch
steps and builds a ProcessedJob (memory, CPU time, dates, GPUs, efficiencies)
per job.  Not timed: importing the module and reading the file into one
string (slurm-usage holds sacct's whole stdout in memory the same way).  Its
per-day date filter (_extract_job_date) is left out: it filters, and all our
jobs would otherwise have to fall on one day.

Prints one line: slurm-usage: jobs=N lines=L rejected=R seconds=S
cpu_seconds=C jobs_per_s=X maxrss_kb=K (ru_maxrss of this process, imports included).
"""
import importlib.metadata
import resource
import sys
import time

from slurm_usage import RawJobRecord, _process_raw_records_into_jobs


def main(path):
    fields = RawJobRecord.get_field_names()
    with open(path, encoding='utf-8') as f:
        text = f.read()
    t0 = time.perf_counter()
    c0 = time.process_time()
    lines = text.strip().split('\n')
    records = []
    rejected = 0
    for line in lines:
        if not line:
            continue
        record = RawJobRecord.from_sacct_line(line, fields)
        if record is None:
            rejected += 1
        else:
            records.append(record)
    jobs, _complete = _process_raw_records_into_jobs(records)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f'slurm-usage: jobs={len(jobs)} lines={len(lines)} rejected={rejected} '
          f'seconds={secs:.3f} cpu_seconds={cpu:.2f} jobs_per_s={len(jobs) / secs:.0f} maxrss_kb={rss} '
          f'version={importlib.metadata.version("slurm-usage")}')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
