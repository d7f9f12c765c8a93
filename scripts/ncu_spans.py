#!/usr/bin/env python3
"""Where a kernel's warps spend their time, from Nsight Compute's source page: the warp
samples of each span of SASS between synchronisations (`BAR.SYNC`, an mbarrier wait, a
wgmma wait), with the top stall reasons of each span, and the samples of every mbarrier
wait and barrier on their own. A stalled warp is sampled at the instruction it cannot
issue, so the wait after a barrier is counted on the instruction that follows it.

On the GPU machine (the profile of one launch, then its source page as CSV):
    ncu --set full -k swap_ab_decode --launch-skip 3 --launch-count 1 -o prof \\
        gpu-bundle/examples/bench_decode --quick --no-chain --only 16,512,fp8,512 --schedule stream
    ncu -i prof.ncu-rep --page source --csv --print-source sass > prof-sass.csv
Then anywhere:
    python3 scripts/ncu_spans.py prof-sass.csv [--min-share PERCENT] [--range NAME:START:END ...]

`--range prologue:0:1890` adds the samples between two SASS offsets (hex, from the kernel's
first instruction) as one line, for regions a reader knows from the SASS (a loop, the merge).
"""

import argparse
import collections
import csv
import gzip
import re

SYNC = re.compile(r"BAR\.SYNC|SYNCS\.PHASECHK|WARPGROUP\.DEPBAR")


def read(path):
    """The instructions of the source page: (offset, SASS text, samples, executed, stall
    reason -> samples)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    body = [r for r in rows[header_at + 1 :] if len(r) > 3 and r[0].startswith("0x")]
    base = int(body[0][0], 16)
    number = lambda r, name: int(r[col[name]] or 0)
    return [
        (
            int(r[0], 16) - base,
            " ".join(r[col["Source"]].split()),
            number(r, "Warp Stall Sampling (All Samples)"),
            number(r, "Instructions Executed"),
            {reason[len("stall_") :]: number(r, reason) for reason in reasons},
        )
        for r in body
    ]


def summary(instructions, total, top=3):
    """Samples and executed instructions of `instructions`, and their top stall reasons, as
    shares of the kernel's."""
    samples = sum(i[2] for i in instructions)
    reasons = collections.Counter()
    for i in instructions:
        reasons.update(i[4])
    tops = ", ".join(f"{r} {100 * n / total:.1f}" for r, n in reasons.most_common(top))
    return f"samples {100 * samples / total:5.1f}% | {tops}"


def spans(instructions):
    """The instructions cut after every synchronisation."""
    span = []
    for i in instructions:
        span.append(i)
        if SYNC.search(i[1]):
            yield span
            span = []
    if span:
        yield span


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="ncu --page source --csv --print-source sass (or .gz)")
    parser.add_argument("--min-share", type=float, default=1.0, help="spans below this %% are left out")
    parser.add_argument("--range", action="append", default=[], help="NAME:START:END, hex SASS offsets")
    args = parser.parse_args()
    instructions = read(args.csv)
    total = sum(i[2] for i in instructions) or 1
    executed = sum(i[3] for i in instructions) or 1
    print(f"{total} warp samples, {executed} warp instructions executed")
    print("whole kernel:", summary(instructions, total, top=8))
    print("\nspans between synchronisations:")
    for span in spans(instructions):
        if 100 * sum(i[2] for i in span) / total >= args.min_share:
            first, last = span[0][0], span[-1][0]
            print(f"  {first:#7x}-{last:#7x} {summary(span, total)} | ends {span[-1][1][:48]}")
    for spec in args.range:
        name, start, end = spec.split(":")
        inside = [i for i in instructions if int(start, 16) <= i[0] < int(end, 16)]
        share = 100 * sum(i[3] for i in inside) / executed
        print(f"{name}: {summary(inside, total, top=4)} | executed {share:.1f}%")
    print("\nsamples at each synchronisation and the 3 instructions after it (a try-wait's")
    print("predicate is read a few instructions on), 2 or more per mille:")
    for k, i in enumerate(instructions):
        if SYNC.search(i[1]):
            share = 100 * sum(j[2] for j in instructions[k : k + 4]) / total
            if share >= 0.2:
                print(f"  {i[0]:#7x} {share:5.2f}% {i[1][:60]}")


if __name__ == "__main__":
    main()
