"""Print, for bench JSON files, each result's median time beside its baselines' and the ratio.

Usage: python tools/bench_ratios.py RESULT.json [...]

``speed`` is baseline time / our time (> 1: we are faster), the way docs/performance.md reports
side-by-side runs; only numbers of the same JSON (the same run) are compared.
"""

from __future__ import annotations

import json
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        for r in json.load(open(path))["results"]:
            prof = r.get("profile") or {}
            ours = prof.get("median_s")
            head = f"{r['op']:16s} n={r['n']:<6d} grid={r['grid'][0]}x{r['grid'][1]} {r['dtype']}"
            if ours is None:
                print(f"{head}  (no profile)")
                continue
            spread = f"[{prof['min_s']:.4g}, {prof['max_s']:.4g}]"
            check = r.get("check") or {}
            verdict = "" if not check else (" PASS" if check.get("passed") else " FAIL")
            print(f"{head}  ours {ours:.4g} s {spread}{verdict}")
            for c in r.get("compare") or []:
                if c.get("median_s"):
                    speed = c["median_s"] / ours
                    print(f"    {c['library']:14s} {c['median_s']:.4g} s  speed {speed:.2f}x")
                else:
                    print(f"    {c['library']:14s} {c.get('note', '')}")


if __name__ == "__main__":
    main(sys.argv[1:])
