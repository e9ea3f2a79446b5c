#!/usr/bin/env python3
"""Medians and ranges per (prompt, press, side) of bench/press_refactor_compare.sh's output."""
import re
import statistics
import sys

COLUMNS = ['(capture+eviction) / full prefill', 'vs snapkv', 'decode tok/s after eviction', 'prefill s']

runs = {}
side = header = None
for line in sys.stdin:
    if m := re.match(r'=== round \d+ side (\w+)', line):
        side = m.group(1)
    elif line.startswith('| prompt'):
        header = [c.strip() for c in line.strip().strip('|').split('|')]
    elif line.startswith('|') and not line.startswith('| ---'):
        row = dict(zip(header, (c.strip() for c in line.strip().strip('|').split('|'))))
        runs.setdefault((row['prompt'], row['press'], side), []).append(row)

print('| prompt | press | side | rounds | ' + ' | '.join(COLUMNS) + ' |')
print('| ---: | --- | --- | ---: |' + ' ---: |' * len(COLUMNS))
for key in sorted(runs):
    cells = []
    for column in COLUMNS:
        # '-': a column the run has no reference for (no `full` press: no full prefill).
        xs = [float(row[column].rstrip('%')) for row in runs[key] if row[column] != '-']
        cells.append(f'{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})' if xs else '-')
    print(f'| {key[0]} | {key[1]} | {key[2]} | {len(runs[key])} | ' + ' | '.join(cells) + ' |')
