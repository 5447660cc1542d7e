"""tools/trace_plot.py: lanes and bars of a small synthetic Chrome trace, and that it draws."""

from __future__ import annotations

import pytest
from tool_module import load_tool

tp = load_tool("trace_plot")


def _meta(pid: int, tid: int, name: str) -> list[dict]:
    return [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}},
        {
            "name": "thread_sort_index",
            "ph": "M",
            "pid": pid,
            "tid": tid,
            "args": {"sort_index": tid},
        },
    ]


def _x(name: str, cat: str, ts: float, dur: float, pid: int, tid: int) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid}


def synthetic() -> dict:
    """Two ranks; rank 1's tracks are listed first and out of order; rank 0 has an unused
    ``host`` track (no complete event, so no lane)."""
    events = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "rank 1"}},
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
        *_meta(1, 2, "comm"),
        *_meta(1, 1, "compute"),
        *_meta(1, 0, "host"),
        *_meta(0, 0, "host"),
        *_meta(0, 1, "compute"),
        *_meta(0, 2, "comm"),
        _x("put_signal", "comm", 1000.0, 500.0, 1, 2),
        _x("gemm", "compute", 1500.0, 3000.0, 1, 1),
        _x("signal_wait", "signal", 0.0, 1500.0, 1, 1),
        _x("launch _pack", "launch", 0.0, 250.0, 0, 2),
        _x("put", "comm", 250.0, 750.0, 0, 2),
        _x("signal_op", "signal", 100.0, 10.0, 0, 1),
        _x("trsm", "compute", 200.0, 2000.0, 0, 1),
        _x("synchronize", "host", 0.0, 5000.0, 1, 0),
    ]
    return {"traceEvents": events}


def test_lanes_in_rank_then_track_order():
    lanes, _ = tp.timeline(synthetic())
    assert lanes == [
        "rank 0 compute",
        "rank 0 comm",
        "rank 1 host",
        "rank 1 compute",
        "rank 1 comm",
    ]


def test_bars_positions_and_kinds():
    lanes, bars = tp.timeline(synthetic())
    got = sorted((lanes[b.lane], b.name, b.start_ms, b.dur_ms, b.kind) for b in bars)
    assert got == sorted(
        [
            ("rank 1 comm", "put_signal", 1.0, 0.5, "put / put_signal"),
            ("rank 1 compute", "gemm", 1.5, 3.0, "compute kernel"),
            ("rank 1 compute", "signal_wait", 0.0, 1.5, "signal wait"),
            ("rank 0 comm", "launch _pack", 0.0, 0.25, "pack/unpack launch"),
            ("rank 0 comm", "put", 0.25, 0.75, "put / put_signal"),
            ("rank 0 compute", "signal_op", 0.1, 0.01, "signal post"),
            ("rank 0 compute", "trsm", 0.2, 2.0, "compute kernel"),
            ("rank 1 host", "synchronize", 0.0, 5.0, "host wait"),
        ]
    )
    assert all(b.kind in tp.KINDS for b in bars)


def test_plot_writes_an_image(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "t.png"
    lanes, bars = tp.plot(synthetic(), out, title="synthetic")
    assert len(lanes) == 5 and len(bars) == 8
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
