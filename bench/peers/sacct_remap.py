#!/usr/bin/env python3
"""Rewrites hpc-ingest's generated sacct text into the layout a peer tool asks
sacct for, so each peer parses the same jobs in the form it expects.

    sacct_remap.py slurm-usage IN OUT
    sacct_remap.py slurm2sql IN OUT [--plain-mem]

IN is `gen_sacct` output: a header line of column names, then '|'-separated
lines with the columns Cluster|JobID|JobIDRaw|User|Group|Account|Partition|
JobName|State|ExitCode|Submit|Start|End|Elapsed|ElapsedRaw|Timelimit|
AllocCPUS|AllocTRES|NNodes|NTasks|NodeList|ReqMem|MaxRSS|TotalCPU.

slurm-usage (slurm_usage.py, 3.1.0) runs
    sacct -a -S DAYT00:00:00 -E DAYT23:59:59 --format=<61 fields> -P -n
with the fields of RawJobRecord.get_field_names() (the model's field order),
and parses each line by position with RawJobRecord.from_sacct_line(line,
fields), which rejects a line whose field count differs.  So OUT has no
header, '|' separators, and those 61 fields in that order: our 24 columns go
into the fields of the same name, and the fields we do not generate (UID, GID,
QOS, Eligible, CPUTime, UserCPU, AveRSS, WorkDir, SubmitLine, ...) are empty.
Two fields sacct always prints as copies of ours are filled from them:
NCPUS = AllocCPUS and AllocNodes = NNodes (see ALIASES).

slurm2sql (slurm2sql.py, 0.9.9) runs
    sacct -o <cols> -P --delimiter=;|; [filters]
with cols = the keys of COLUMNS not starting with '_' plus COLUMNS_EXTRA, and
reads the first line as a header, splitting every line on ';|;' and zipping
it with the header (a line with more fields than columns is an error, fewer
is taken for a JobName with a newline and joined with the next line).  So OUT
has a header of exactly those column names, ';|;' separators, our columns in
the fields of the same name (and the ALIASES) and the rest empty.  NCPUS must
be filled: slurm2sql does int(row['NCPUS']) for its ReqMemNode/ReqMemCPU.  slurm2sql takes TotalCPU
(and its memory totals) from TRESUsageInTot rather than from the TotalCPU
column, so TRESUsageInTot is filled as "cpu=<TotalCPU>,mem=<MaxRSS>" on lines
that have them (what sacct prints there), giving it the same data to parse.

--plain-mem turns the old per-CPU/per-node memory forms (4000Mc, 8Gn) into
plain sizes (4000M, 8G): slurm2sql's float_bytes() crashes on them
(ValueError: could not convert string to float).  That changes the meaning
(per CPU/per node to per job) but not the amount of parsing work.
"""
import sys

# Peer field -> our column, for fields sacct prints with the same value.
ALIASES = {'NCPUS': 'AllocCPUS', 'AllocNodes': 'NNodes'}


def slurm_usage_fields():
    from slurm_usage import RawJobRecord
    return RawJobRecord.get_field_names()


def slurm2sql_fields():
    import slurm2sql
    return [c for c in list(slurm2sql.COLUMNS.keys()) + slurm2sql.COLUMNS_EXTRA
            if not c.startswith('_')]


def main(argv):
    if len(argv) < 3 or argv[0] not in ('slurm-usage', 'slurm2sql'):
        sys.exit(__doc__)
    peer, src, dst = argv[0], argv[1], argv[2]
    plain_mem = '--plain-mem' in argv[3:]
    if peer == 'slurm-usage':
        fields, sep, header = slurm_usage_fields(), '|', False
    else:
        fields, sep, header = slurm2sql_fields(), ';|;', True
    with open(src, encoding='utf-8') as f, open(dst, 'w', encoding='utf-8') as out:
        ours = f.readline().rstrip('\n').split('|')
        pos = {name: i for i, name in enumerate(ours)}
        # For each peer field: the index of our column, or None (empty).
        take = [pos.get(name, pos.get(ALIASES.get(name, ''))) for name in fields]
        tres_at = fields.index('TRESUsageInTot') if 'TRESUsageInTot' in fields else None
        cpu_at, rss_at, mem_at = pos['TotalCPU'], pos['MaxRSS'], pos['ReqMem']
        if header:
            out.write(sep.join(fields) + '\n')
        n = 0
        for line in f:
            v = line.rstrip('\n').split('|')
            if plain_mem and v[mem_at][-1:] in ('c', 'n'):
                v[mem_at] = v[mem_at][:-1]
            row = ['' if i is None else v[i] for i in take]
            if tres_at is not None:
                parts = []
                if v[cpu_at]:
                    parts.append('cpu=' + v[cpu_at])
                if v[rss_at]:
                    parts.append('mem=' + v[rss_at])
                row[tres_at] = ','.join(parts)
            out.write(sep.join(row) + '\n')
            n += 1
    print(f'sacct_remap: {n} lines for {peer}, {len(fields)} fields each', file=sys.stderr)


if __name__ == '__main__':
    main(sys.argv[1:])
