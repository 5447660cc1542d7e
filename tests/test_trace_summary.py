"""tools/trace_summary.py: busy time as a union of intervals, idle gaps, per-step split and the
printed summary of a small synthetic Chrome trace."""

from __future__ import annotations

import json

import pytest
from tool_module import load_tool

ts = load_tool("trace_summary")


def _x(name: str, t0: float, dur: float, pid: int = 0, tid: int = 1) -> dict:
    return {"name": name, "cat": "x", "ph": "X", "ts": t0, "dur": dur, "pid": pid, "tid": tid}


def test_union_counts_overlaps_once():
    # [0, 10) and [5, 20) overlap; [30, 31) apart; [12, 14) inside the second: 21 us in all
    assert ts.union_ms([(0, 10), (5, 20), (30, 31), (12, 14)]) == pytest.approx(0.021)
    assert ts.union_ms([]) == 0.0


def test_gaps_name_the_events_around_them():
    evs = [_x("a", 0, 10), _x("b", 5, 20), _x("c", 40, 5), _x("d", 41, 1), _x("e", 50, 1)]
    # idle from 25 (end of b) to 40 (c), and from 45 (end of c; d ends inside it) to 50 (e)
    assert ts.gaps(evs) == [(25, 15, "b", "c"), (45, 5, "c", "e")]


def test_summary_per_track_and_per_step(tmp_path, capsys):
    meta = [
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "compute"}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 2, "args": {"name": "comm"}},
    ]
    events = [
        _x("potrf", 0, 2000),
        _x("gemm", 2000, 3000),
        _x("potrf", 6000, 1000),  # 1 ms idle before it
        _x("gemm", 7000, 1000),
        _x("put_signal", 500, 1500, tid=2),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": meta + events}))
    ts.main([str(path), "--steps", "potrf"])
    out = capsys.readouterr().out
    assert "rank 0 compute: span 8.00 ms (0.00-8.00), busy 7.00 ms (88%)" in out
    assert "potrf                            2 x  total      3.00 ms  max     2.00 ms" in out
    assert "idle 1.00 ms in 1 gap(s)" in out
    assert "1.00 ms at     5.00 ms  after gemm -> potrf" in out
    # step 0: 0-6 ms, 5 busy; step 1: 6-8 ms, all busy
    assert "step   0         0.00       6.00       5.00       1.00" in out
    assert "step   1         6.00       2.00       2.00       0.00" in out
    assert "rank 0 comm: span 1.50 ms (0.50-2.00), busy 1.50 ms (100%)" in out
