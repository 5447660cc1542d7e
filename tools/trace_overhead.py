"""Cost of the tracing hooks when tracing is off: GEMM timed in a process that never traced
(``--variant never``) against one that entered and left a ``bm.trace`` block first
(``--variant after``); ``--variant both`` times the first, traces once, then times the second in
the same process (paired, so that a change of the machine's load between launches matters less).
Each variant times the run exactly as ``python -m blasmp_array.bench --profile`` does
(warm-up, then ``--repeat`` calls, each the slowest rank's time after a barrier).

Every timed variant also checks that no wrapper is left: no traced method name is in the
backend instance's ``__dict__`` and each method is the class's own function (``unwrapped``).

Run it under ``mpiexec``; rank 0 prints one JSON line per variant (times and their median)::

    mpiexec -n 2 python tools/trace_overhead.py --variant both --n 2048 --block 256 --repeat 5
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("never", "after", "both"), required=True)
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    import blasmp_array as bm
    from blasmp_array.bench.cli import _time_runs
    from blasmp_array.bench.operators import Case, prepare
    from blasmp_array.trace import HOST_METHODS, STREAM_METHODS

    n = args.n
    p = prepare(Case("gemm", n, n, n, block=(args.block, args.block)))
    be = p.grid.backend
    names = STREAM_METHODS + HOST_METHODS

    def unwrapped() -> bool:
        return not any(name in be.__dict__ for name in names) and all(
            getattr(be, name).__func__ is getattr(type(be), name) for name in names
        )

    def timed(variant: str) -> dict:
        times = _time_runs(p, lambda: None, args.warmup, args.repeat)["times_s"]
        return {
            "variant": variant,
            "ranks": be.size,
            "n": n,
            "block": args.block,
            "unwrapped": unwrapped(),
            "times_s": [round(t, 5) for t in times],
            "median_s": round(float(np.median(times)), 5),
        }

    results = []
    if args.variant == "both":
        results.append(timed("never"))
    if args.variant in ("after", "both"):
        with bm.trace(None):
            p.run()
            be.synchronize()
        if not unwrapped():
            raise SystemExit(f"rank {be.rank}: a traced method is still wrapped")
    results.append(timed(args.variant if args.variant != "both" else "after"))
    if be.rank == 0:
        for out in results:
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
