#!/usr/bin/env python3
"""corpus_mix.py OUT SEED BASE.jsonl EXTRA.jsonl KINDS: BASE's conversations plus those of EXTRA
whose meta.kind is one of KINDS (comma-separated), shuffled with SEED, written to OUT.

tern-tool 2's second stage (models/README.md) used it to add more `unavailable` and `parallel`
conversations, the slices its development set scored lowest, to a function-masked chunk of the
corpus: corpus_mix.py train3.jsonl 5 n3-masked.jsonl rest.jsonl unavailable,parallel.
"""
import json
import os
import random
import sys


def main():
    if len(sys.argv) != 6 or not sys.argv[2].lstrip("-").isdigit():
        sys.exit("usage: " + __doc__.split("\n")[0] + " (SEED an integer)")
    out, seed, base, extra, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    try:
        mix(out, seed, base, extra, kinds)
    except OSError as e:
        sys.exit("corpus_mix: %s: %s" % (e.filename, e.strerror))


def mix(out, seed, base, extra, kinds):
    want = set(kinds.split(","))
    with open(base) as f:
        lines = f.readlines()
    added = []
    with open(extra) as f:
        for n, line in enumerate(f, 1):
            try:
                kind = json.loads(line)["meta"]["kind"]
            except (ValueError, KeyError, TypeError) as e:
                sys.exit("corpus_mix: %s:%d: not a corpus conversation (%s)" % (extra, n, e))
            if kind in want:
                added.append(line)
    random.seed(seed)
    lines += added
    random.shuffle(lines)
    with open(out + ".tmp", "w") as f:
        f.writelines(lines)
    os.replace(out + ".tmp", out)
    print("%d conversations (%d added from %s)" % (len(lines), len(added), extra))


if __name__ == "__main__":
    main()
