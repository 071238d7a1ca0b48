#!/usr/bin/env python3
"""table.py — the one Markdown table of bench/peers/run.sh, from the "ROW {json}" lines its
comparisons print (read from stdin or the files given).

A row: {"layer", "peer", "metric", "tern", "peer_value", optional "ratio", optional "note"}.
"ratio" is how many times faster tern is (above 1: tern ahead), printed as 2.10x; rows without
one (counts such as identical ids or schemas supported) print a dash there. Rows whose comparison
could not run carry the reason in "note" and dashes for the figures.
"""
import fileinput
import json


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def main():
    rows = []
    for line in fileinput.input():
        if line.startswith("ROW "):
            rows.append(json.loads(line[4:]))
    print("| layer | peer | metric | tern | peer's figure | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else "-"
        metric = r["metric"] + (f" ({r['note']})" if r.get("note") else "")
        print(f"| {r['layer']} | {r['peer']} | {metric} | {fmt(r.get('tern'))} | {fmt(r.get('peer_value'))} | {ratio} |")


if __name__ == "__main__":
    main()
