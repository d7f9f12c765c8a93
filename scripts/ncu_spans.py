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
    python3 scripts/ncu_spans.py prof-sass.csv [--min-share PERCENT] [--range NAME:START:END ...] [--banks N]

`--range prologue:0:1890` adds the samples between two SASS offsets (hex, from the kernel's
first instruction) as one line, for regions a reader knows from the SASS (a loop, the merge).
`--banks N` lists the N instructions with the most excessive shared-memory wavefronts (bank
conflicts; a profile with the SourceCounters section), to set beside `kestrel run KEY
--banks`, the interpreter's count of the same.
"""

import argparse
import collections
import csv
import gzip
import re

SYNC = re.compile(r"BAR\.SYNC|SYNCS\.PHASECHK|WARPGROUP\.DEPBAR")


def source_page(path):
    """The source page's columns (name -> index) and its instruction rows."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    col = {name: i for i, name in enumerate(rows[header_at])}
    body = [r for r in rows[header_at + 1 :] if len(r) > 3 and r[0].startswith("0x")]
    return col, body


def instruction_fields(page, names):
    """Per instruction of a `source_page`: (offset from the kernel's first, SASS text, then
    each named column as an integer)."""
    col, body = page
    base = int(body[0][0], 16)
    return [
        (int(r[0], 16) - base, " ".join(r[col["Source"]].split()), *(int(r[col[n]] or 0) for n in names))
        for r in body
    ]


def read(page):
    """The instructions of a `source_page`: (offset, SASS text, samples, executed, stall
    reason -> samples)."""
    col, _ = page
    reasons = [h for h in col if h.startswith("stall_") and "Not Issued" not in h]
    names = ["Warp Stall Sampling (All Samples)", "Instructions Executed", *reasons]
    return [
        (offset, text, samples, executed, {r[len("stall_") :]: n for r, n in zip(reasons, stalls)})
        for offset, text, samples, executed, *stalls in instruction_fields(page, names)
    ]


def shared_wavefronts(page):
    """Per SASS instruction of a `source_page` with shared-memory wavefronts: (offset, SASS
    text, executed, wavefronts, excessive); empty where the profile lacks the source
    counters."""
    col, _ = page
    names = ["Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Excessive"]
    if any(n not in col for n in names):
        return []
    return [row for row in instruction_fields(page, names) if row[3]]


def print_banks(page, count):
    """The kernel's shared-memory wavefronts and its `count` most conflicted instructions."""
    rows = shared_wavefronts(page)
    if not rows:
        print("\nno shared-memory wavefront counts in this profile (ncu --section SourceCounters)")
        return
    total = sum(r[3] for r in rows)
    excessive = sum(r[4] for r in rows)
    print(f"\nshared-memory wavefronts: {total}, of which {excessive} ({100 * excessive / total:.1f}%)")
    print("excessive (bank conflicts); MMA operand reads included. Most conflicted:")
    for offset, text, executed, wavefronts, excess in sorted(rows, key=lambda r: -r[4])[:count]:
        if excess == 0:
            break
        ideal = (wavefronts - excess) / executed
        print(f"  {offset:#7x} {excess:9} excessive  {wavefronts / executed:.1f} a warp (ideal {ideal:.1f})  {text[:56]}")


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
    parser.add_argument("--banks", type=int, default=0, metavar="N", help="list the N most bank-conflicted instructions")
    args = parser.parse_args()
    page = source_page(args.csv)
    instructions = read(page)
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
    if args.banks:
        print_banks(page, args.banks)


if __name__ == "__main__":
    main()
