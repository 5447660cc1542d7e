"""The data door against its targets: ratios of the bench's data rows (``random``, ``from_numpy``,
``to_numpy``, ``to_zarr``, ``from_zarr``, ``to_dask``) to their peers, from the JSON of
``python -m blasmp_array.bench ... --compare``. Only numbers of one JSON (one run) are divided,
except the 4-rank targets, which compare a 4-rank run with a 1-rank run of the same node.

    python tools/door_summary.py merge OUT.json IN.json [IN.json ...]
    python tools/door_summary.py gpu --one perf-door1.json [--four perf-door4.json] [--json S]
    python tools/door_summary.py cpu --one r1.json r2.json r3.json [--two r1.json ...] [--json S]

``merge`` joins the records of several bench runs (e.g. one per row) into one file. ``gpu``
prints the GPU targets: each row of the 1-rank run against its peer of the same run, and each
row of the 4-rank run against the 1-rank run. ``cpu`` prints the CPU targets: for each row, each
round's time ours / reference (the same JSON), and their median over the rounds, at 1 rank
(``--one``) and 2 ranks (``--two``).

``time`` is ours / the reference's median time (< 1: we are faster), ``speed`` its inverse.
A row without its peer (not installed, not run) is reported as missing, never estimated.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from typing import Any

#: the library names the bench's peers carry (blasmp_array/bench/door_peers.py)
CUPY, NUMPY, DASK, OURS_TO_NUMPY = "cupy", "numpy", "dask.array", "blasmp_array to_numpy()"
RANDOM = ("random", "random_uniform", "random_random")


@dataclass(frozen=True)
class Target:
    """``op`` against ``peer``: ``time`` ours / peer's must be ``<= bound``."""

    op: str
    peer: str
    bound: float
    text: str


#: GPU, 1 rank, same run (the issue's rates as time bounds: rate >= x  <=>  time <= 1 / x)
GPU_ONE = [
    *(Target(op, CUPY, 2.0, "rate >= 0.5x cupy.random") for op in RANDOM),
    Target("from_numpy", CUPY, 1 / 1.2, "rate >= 1.2x cupy.asarray"),
    Target("to_numpy", CUPY, 1 / 2.0, "rate >= 2x cupy.asnumpy"),
    Target("to_zarr", DASK, 1.0, "rate >= 1.0x Dask to_zarr"),
    Target("from_zarr", DASK, 1.0, "rate >= 1.0x Dask from_zarr().compute()"),
    Target("to_dask", OURS_TO_NUMPY, 1.5, "time <= 1.5x to_numpy"),
]
#: GPU, 4 ranks against 1 rank (``peer`` is unused: the 1-rank run's own row)
GPU_FOUR = [
    *(Target(op, "", 1.0, "no slower than 1 rank") for op in RANDOM),
    Target("from_numpy", "", 1.5, "time <= 1.5x 1 rank"),
    Target("to_numpy_root", "", 1.5, "time <= 1.5x 1 rank"),
    Target("to_zarr", "", 0.5, "rate >= 2x 1 rank"),
    Target("from_zarr", "", 0.5, "rate >= 2x 1 rank"),
]
#: CPU, n = 4096, median over rounds of time ours / reference; bounds at (1 rank, 2 ranks)
CPU = [
    (Target("random", NUMPY, 1.1, "NumPy default_rng"), 0.7),
    (Target("from_numpy", NUMPY, 1.5, "h.copy()"), 1.5),
    (Target("to_numpy_root", NUMPY, 1.5, "h.copy()"), 2.0),
    (Target("to_zarr", DASK, 1.0, "Dask to_zarr"), 0.8),
    (Target("from_zarr", DASK, 1.0, "Dask from_zarr().compute()"), 0.8),
    (Target("to_dask", NUMPY, 2.0, "h.copy()"), 2.5),
]
#: shown beside the CPU targets, without a bound
CPU_ALSO = [
    Target("random_uniform", NUMPY, 0.0, "NumPy default_rng uniform"),
    Target("random_random", NUMPY, 0.0, "NumPy default_rng random"),
    Target("to_numpy", NUMPY, 0.0, "h.copy()"),
    Target("to_zarr", "zarr", 0.0, "zarr z[...] = h"),
    Target("from_zarr", "zarr", 0.0, "zarr z[...]"),
    Target("to_dask", OURS_TO_NUMPY, 0.0, "our to_numpy()"),
    Target("to_dask", DASK, 0.0, "Dask from_array().compute()"),
]


def load(path: str) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def merge(paths: list[str]) -> dict[str, Any]:
    """One bench payload holding the results of all ``paths`` (environment of the first; every
    command kept)."""
    payloads = [load(p) for p in paths]
    if not payloads:
        raise SystemExit("merge: no input files")
    out = dict(payloads[0])
    out["results"] = [r for p in payloads for r in p["results"]]
    out["commands"] = [p["environment"]["command"] for p in payloads]
    return out


def rows(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The records of a payload by row name (the last one wins)."""
    return {r["op"]: r for r in payload["results"]}


def our_time(record: dict[str, Any] | None) -> float | None:
    prof = (record or {}).get("profile") or {}
    return prof.get("median_s")


def peer_time(record: dict[str, Any] | None, library: str) -> float | None:
    for b in (record or {}).get("compare") or []:
        if b.get("library") == library and b.get("median_s"):
            return float(b["median_s"])
    return None


def time_ratio(record: dict[str, Any] | None, library: str) -> float | None:
    """Our median time over ``library``'s, in one run; None when either is missing."""
    ours, theirs = our_time(record), peer_time(record, library)
    if not ours or not theirs:
        return None
    return ours / theirs


def missing_why(record: dict[str, Any] | None, library: str) -> str:
    """Why a ratio is missing: the row was not run, or the peer's note (e.g. not installed)."""
    if record is None:
        return "row not run"
    if not our_time(record):
        return "row not timed"
    for b in record.get("compare") or []:
        if b.get("library") == library:
            return b.get("note") or "peer not timed"
    return f"no {library} peer in the run"


def verdict(ratio: float | None, bound: float) -> str:
    if ratio is None:
        return "missing"
    return "met" if ratio <= bound else "MISSED"


def gpu_summary(one: dict[str, Any], four: dict[str, Any] | None) -> dict[str, Any]:
    """The GPU targets from a 1-rank run and, if given, a 4-rank run."""
    r1 = rows(one)
    out: dict[str, Any] = {"one_rank": [], "four_ranks": []}
    for t in GPU_ONE:
        ratio = time_ratio(r1.get(t.op), t.peer)
        line = _line(t, ratio, t.bound)
        if ratio is None:
            line["why"] = missing_why(r1.get(t.op), t.peer)
        out["one_rank"].append(line)
    if four is not None:
        r4 = rows(four)
        for t in GPU_FOUR:
            t1, t4 = our_time(r1.get(t.op)), our_time(r4.get(t.op))
            ratio = t4 / t1 if t1 and t4 else None
            line = _line(t, ratio, t.bound)
            line.update(time_1_rank_s=t1, time_4_ranks_s=t4)
            if ratio is None:
                line["why"] = f"row not timed in the {'1' if not t1 else '4'}-rank run"
            out["four_ranks"].append(line)
    return out


def cpu_summary(rounds: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The CPU targets: ``rounds[ranks]`` are the bench payloads of each round."""
    out: dict[str, Any] = {}
    for ranks, payloads in sorted(rounds.items()):
        lines = []
        for t, two in CPU:
            bound = t.bound if ranks == 1 else two
            lines.append(_rounds_line(t, payloads, bound))
        lines += [_rounds_line(t, payloads, None) for t in CPU_ALSO]
        out[f"{ranks}_rank{'s' if ranks > 1 else ''}"] = lines
    return out


def _rounds_line(t: Target, payloads: list[dict[str, Any]], bound: float | None) -> dict:
    per_round = [time_ratio(rows(p).get(t.op), t.peer) for p in payloads]
    measured = [r for r in per_round if r is not None]
    median = statistics.median(measured) if measured else None
    line = _line(t, median, bound)
    line["rounds"] = per_round
    if median is None and payloads:
        line["why"] = missing_why(rows(payloads[0]).get(t.op), t.peer)
    return line


def _line(t: Target, ratio: float | None, bound: float | None) -> dict[str, Any]:
    return {
        "op": t.op,
        "reference": t.peer or "1 rank",
        "target": t.text,
        "time_ratio": ratio,
        "bound": bound,
        "verdict": "-" if bound is None else verdict(ratio, bound),
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def print_lines(title: str, lines: list[dict[str, Any]]) -> None:
    print(title)
    print(f"  {'row':15s} {'reference':24s} {'time':>7s} {'speed':>7s} {'bound':>9s}  verdict")
    for line in lines:
        r = line["time_ratio"]
        speed = None if not r else 1 / r
        bound = "" if line["bound"] is None else f"<= {line['bound']:.3g}"
        rounds = line.get("rounds")
        extra = "" if rounds is None else "  rounds " + ", ".join(_fmt(x) for x in rounds)
        if line.get("why"):
            extra += f"  [{line['why']}]"
        print(
            f"  {line['op']:15s} {line['reference']:24s} {_fmt(r):>7s} {_fmt(speed):>7s} "
            f"{bound:>9s}  {line['verdict']} ({line['target']}){extra}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="join bench JSON files")
    m.add_argument("out")
    m.add_argument("inputs", nargs="+")
    g = sub.add_parser("gpu", help="the GPU targets")
    g.add_argument("--one", required=True, help="bench JSON of the 1-rank run")
    g.add_argument("--four", default=None, help="bench JSON of the 4-rank run")
    g.add_argument("--json", default=None, help="write the summary here")
    c = sub.add_parser("cpu", help="the CPU targets")
    c.add_argument("--one", nargs="+", required=True, help="bench JSON of each 1-rank round")
    c.add_argument("--two", nargs="*", default=[], help="bench JSON of each 2-rank round")
    c.add_argument("--json", default=None, help="write the summary here")
    args = p.parse_args(argv)
    if args.cmd == "merge":
        with open(args.out, "w") as f:
            json.dump(merge(args.inputs), f, indent=2)
        return 0
    if args.cmd == "gpu":
        summary = gpu_summary(load(args.one), load(args.four) if args.four else None)
        print_lines(
            f"GPU, 1 rank ({args.one}): ours against the peer of the same run", summary["one_rank"]
        )
        if args.four:
            print_lines(
                f"GPU, 4 ranks ({args.four}) against 1 rank ({args.one})", summary["four_ranks"]
            )
    else:
        rounds = {1: [load(x) for x in args.one]}
        if args.two:
            rounds[2] = [load(x) for x in args.two]
        summary = cpu_summary(rounds)
        for key, lines in summary.items():
            ranks = key.replace("_", " ")
            print_lines(
                f"CPU, {ranks} (references in one process, Dask workers = ranks): time ours / "
                "reference, median of the rounds",
                lines,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
