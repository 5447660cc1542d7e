"""A static timeline picture of a blasmp_array trace (the Chrome-trace JSON of
``blasmp_array.trace``), for when Perfetto is not at hand.

One horizontal lane per (rank, stream), top to bottom in rank order and, within a rank, in the
trace's own track order (``host``, ``compute``, ``comm``). Every complete event is a bar from its
start to its end, coloured by kind: compute kernels (``gemm``, ``syrk``, ...), pack/unpack
launches, puts (``put``, ``put_signal``, ``quiet``), signal posts, signal waits, host waits
(``synchronize``, ``barrier``). Time is in milliseconds from the trace's origin.

Run ``python tools/trace_plot.py gemm4.json -o docs/_static/gemm_trace_4ranks.png``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the kinds in legend order, with their colours
KINDS: dict[str, str] = {
    "compute kernel": "#1f77b4",
    "pack/unpack launch": "#aec7e8",
    "put / put_signal": "#ff7f0e",
    "signal post": "#9467bd",
    "signal wait": "#d62728",
    "host wait": "#7f7f7f",
    "other": "#bcbd22",
}
_KERNELS = ("gemm", "syrk", "syr2k", "trmm", "trsm", "symm")


def kind_of(event: dict[str, Any]) -> str:
    """The colour class of a complete event (by its name, then its category)."""
    name = str(event.get("name", ""))
    cat = event.get("cat")
    if name in _KERNELS or cat == "compute":
        return "compute kernel"
    if name.startswith("launch") or cat == "launch":
        return "pack/unpack launch"
    if name in ("put", "put_signal", "quiet") or cat == "comm":
        return "put / put_signal"
    if name == "signal_wait":
        return "signal wait"
    if name == "signal_op":
        return "signal post"
    if name in ("synchronize", "barrier") or cat == "host":
        return "host wait"
    return "other"


@dataclass(frozen=True)
class Bar:
    """One event as drawn: its lane (index into the lane list), start and length in ms."""

    lane: int
    start_ms: float
    dur_ms: float
    kind: str
    name: str


def timeline(data: dict[str, Any]) -> tuple[list[str], list[Bar]]:
    """Lanes (``"rank R stream"`` labels, top to bottom) and bars of a Chrome-trace dict.

    Only tracks that hold at least one complete (``"ph": "X"``) event get a lane. Tracks are
    ordered by process id, then by ``thread_sort_index`` (else thread id).
    """
    events = data.get("traceEvents", [])
    procs: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    order: dict[tuple[int, int], int] = {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["name"] == "thread_sort_index":
            order[(e["pid"], e["tid"])] = e["args"]["sort_index"]
    complete = [e for e in events if e.get("ph") == "X"]
    keys = sorted(
        {(e["pid"], e["tid"]) for e in complete}, key=lambda k: (k[0], order.get(k, k[1]))
    )
    lanes = [
        f"{procs.get(pid, f'pid {pid}')} {threads.get((pid, tid), f'tid {tid}')}"
        for pid, tid in keys
    ]
    index = {key: i for i, key in enumerate(keys)}
    bars = [
        Bar(
            lane=index[(e["pid"], e["tid"])],
            start_ms=e["ts"] / 1e3,
            dur_ms=e["dur"] / 1e3,
            kind=kind_of(e),
            name=e["name"],
        )
        for e in complete
    ]
    return lanes, bars


def plot(
    data: dict[str, Any], out: str | Path, title: str | None = None
) -> tuple[list[str], list[Bar]]:
    """Draw the timeline of ``data`` into the image file ``out``; return its lanes and bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    lanes, bars = timeline(data)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(lanes) + 1.6), dpi=120)
    used = [k for k in KINDS if any(b.kind == k for b in bars)]
    for kind in used:
        for lane in range(len(lanes)):
            spans = [(b.start_ms, b.dur_ms) for b in bars if b.lane == lane and b.kind == kind]
            if spans:
                ax.broken_barh(
                    spans,
                    (lane - 0.38, 0.76),
                    facecolors=KINDS[kind],
                    edgecolor="white",
                    linewidth=0.4,
                )
    # lanes top to bottom; a faint line between ranks
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
    ranks = [label.rsplit(" ", 1)[0] for label in lanes]
    for i in range(1, len(lanes)):
        if ranks[i] != ranks[i - 1]:
            ax.axhline(i - 0.5, color="#cccccc", linewidth=0.8)
    ax.set_xlabel("time (ms)")
    ax.set_xlim(left=min((b.start_ms for b in bars), default=0.0))
    ax.grid(axis="x", color="#eeeeee")
    ax.set_axisbelow(True)
    ax.legend(
        handles=[Patch(facecolor=KINDS[k], label=k) for k in used],
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=len(used),
        fontsize=8,
        frameon=False,
    )
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return lanes, bars


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="Chrome-trace JSON written by blasmp_array.trace")
    parser.add_argument("-o", "--out", required=True, help="image file (PNG, SVG, PDF)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    data = json.loads(Path(args.trace).read_text())
    lanes, bars = plot(data, args.out, args.title)
    print(f"{args.out}: {len(lanes)} lanes, {len(bars)} events")


if __name__ == "__main__":
    main()
