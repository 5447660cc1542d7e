"""Where the time of one traced call goes: a text summary of a blasmp_array trace (the
Chrome-trace JSON of ``blasmp_array.trace`` or of the bench's ``--trace``), per rank and per
track (``host``, ``compute``, ``comm``), for the per-step profiles the performance issues ask for.

For every (rank, track): the span from its first start to its last end, the busy time (the union
of its events, so overlapping launches count once) and the time per event name. For the compute
track, the idle gaps: their total and the largest ones with the events on either side (a gap is
where the GPU's compute stream waited -- for a panel, a signal, the host). ``--steps NAME`` splits
each rank's compute track at every event called NAME (``potrf``, ``getrf``, ``trsm``) and prints
per step: the wall time from one NAME to the next, the compute busy time in it, and its idle time.

Run ``python tools/trace_summary.py perf-tracechol4.trace.json --steps potrf``.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any


def load(path: str) -> tuple[list[dict[str, Any]], dict[tuple[int, int], str]]:
    """The complete (``ph == 'X'``) events and the ``(pid, tid) -> track name`` map."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    return [e for e in events if e.get("ph") == "X"], names


def union_ms(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``[t0, t1)`` intervals (microseconds in, milliseconds out)."""
    total, end = 0.0, float("-inf")
    for t0, t1 in sorted(intervals):
        if t1 <= end:
            continue
        total += t1 - max(t0, end)
        end = t1
    return total / 1e3


def gaps(events: list[dict[str, Any]]) -> list[tuple[float, float, str, str]]:
    """Idle intervals of one track: ``(start_us, length_us, name before, name after)``."""
    out = []
    ordered = sorted(events, key=lambda e: e["ts"])
    end, before = ordered[0]["ts"] + ordered[0]["dur"], ordered[0]["name"]
    for e in ordered[1:]:
        if e["ts"] > end:
            out.append((end, e["ts"] - end, before, e["name"]))
        if e["ts"] + e["dur"] >= end:
            end, before = e["ts"] + e["dur"], e["name"]
    return out


def summarise(path: str, top: int, steps: str | None) -> None:
    events, names = load(path)
    by_track: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_track[(e["pid"], e["tid"])].append(e)
    origin = min(e["ts"] for e in events)
    print(f"{path}: {len(events)} events, {len(set(p for p, _ in by_track))} rank(s)")
    for (pid, tid), evs in sorted(by_track.items()):
        track = names.get((pid, tid), str(tid))
        t0 = min(e["ts"] for e in evs)
        t1 = max(e["ts"] + e["dur"] for e in evs)
        busy = union_ms([(e["ts"], e["ts"] + e["dur"]) for e in evs])
        span = (t1 - t0) / 1e3
        print(
            f"\nrank {pid} {track}: span {span:.2f} ms ({(t0 - origin) / 1e3:.2f}-"
            f"{(t1 - origin) / 1e3:.2f}), busy {busy:.2f} ms ({100 * busy / max(span, 1e-9):.0f}%)"
        )
        per_name: dict[str, list[float]] = defaultdict(list)
        for e in evs:
            per_name[e["name"]].append(e["dur"] / 1e3)
        for name, ds in sorted(per_name.items(), key=lambda kv: -sum(kv[1]))[:top]:
            print(f"  {name:28s} {len(ds):5d} x  total {sum(ds):9.2f} ms  max {max(ds):8.2f} ms")
        if track == "compute":
            idle = gaps(evs)
            total = sum(g[1] for g in idle) / 1e3
            print(f"  idle {total:.2f} ms in {len(idle)} gap(s); largest:")
            for start, length, before, after in sorted(idle, key=lambda g: -g[1])[:top]:
                print(
                    f"    {length / 1e3:8.2f} ms at {(start - origin) / 1e3:8.2f} ms"
                    f"  after {before} -> {after}"
                )
            if steps:
                per_step(evs, steps, origin)


def per_step(evs: list[dict[str, Any]], name: str, origin: float) -> None:
    """Per step (from one ``name`` event to the next): wall, compute busy and idle time."""
    ordered = sorted(evs, key=lambda e: e["ts"])
    marks = [e["ts"] for e in ordered if e["name"] == name]
    if not marks:
        print(f"  (no {name!r} event on this track)")
        return
    end = max(e["ts"] + e["dur"] for e in ordered)
    bounds = list(zip(marks, marks[1:] + [end], strict=True))
    print(f"  per step (split at {name!r}):   start ms    wall ms    busy ms    idle ms")
    for k, (s0, s1) in enumerate(bounds):
        inside = [
            (max(e["ts"], s0), min(e["ts"] + e["dur"], s1))
            for e in ordered
            if e["ts"] < s1 and e["ts"] + e["dur"] > s0
        ]
        busy = union_ms(inside)
        wall = (s1 - s0) / 1e3
        start = (s0 - origin) / 1e3
        print(f"    step {k:3d} {start:12.2f} {wall:10.2f} {busy:10.2f} {wall - busy:10.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a trace JSON of blasmp_array.trace / the bench's --trace")
    parser.add_argument("--top", type=int, default=6, help="names and gaps listed per track")
    parser.add_argument("--steps", default=None, help="split the compute track at this event")
    args = parser.parse_args(argv)
    summarise(args.trace, args.top, args.steps)


if __name__ == "__main__":
    main()
