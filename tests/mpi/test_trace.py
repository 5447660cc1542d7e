"""Tracing: the merged Chrome/Perfetto trace of a distributed run, and the partial trace a rank
writes when a signal never arrives.

Rank 0 validates the merged file and broadcasts the list of problems, so every rank asserts the
same thing (a failure on rank 0 alone would leave the other ranks waiting in the next test).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.trace import HOST_METHODS, STREAM_METHODS

# tolerance of the nesting check: timestamps are written rounded to 1 ns (in microseconds)
_ROUND_US = 2e-3


@pytest.fixture
def shared_dir(comm):
    """A directory that every rank sees under the same name."""
    path = comm.bcast(tempfile.mkdtemp(prefix="blasmp-trace-") if comm.rank == 0 else None)
    yield Path(path)
    comm.Barrier()
    if comm.rank == 0:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cpu_grid():
    return bm.ProcessGrid(backend="cpu")


def complete_events(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in data["traceEvents"] if e.get("ph") == "X"]


def structure_problems(data: dict[str, Any], nranks: int) -> list[str]:
    """What is wrong with a merged trace (empty when it is well formed)."""
    problems: list[str] = []
    if not isinstance(data.get("traceEvents"), list):
        return ["no traceEvents list"]
    meta = [e for e in data["traceEvents"] if e.get("ph") == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    if sorted(procs) != list(range(nranks)):
        problems.append(f"process_name metadata for pids {sorted(procs)}, expected 0..{nranks - 1}")
    for pid in range(nranks):
        names = [name for (p, _), name in threads.items() if p == pid]
        if len(names) != len(set(names)):
            problems.append(f"rank {pid} has two tracks with the same stream name: {names}")
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in complete_events(data):
        for key in ("name", "ts", "dur", "pid", "tid", "args"):
            if key not in e:
                problems.append(f"event without {key!r}: {e}")
        if e["dur"] < 0:
            problems.append(f"negative duration: {e}")
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key in tracks:
        if key not in threads:
            problems.append(f"track {key} has no thread_name metadata")
    # complete events on one track must nest properly: no partial overlap
    for key, events in tracks.items():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends: list[float] = []
        for e in events:
            start, end = e["ts"], e["ts"] + e["dur"]
            while open_ends and open_ends[-1] <= start + _ROUND_US:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + _ROUND_US:
                problems.append(
                    f"track {key} ({threads.get(key)}): {e['name']} at {start} "
                    f"overlaps the enclosing event ending at {open_ends[-1]}"
                )
            open_ends.append(end)
    return problems


def shared_verdict(comm, check) -> list[str]:
    """Run ``check()`` on rank 0 and give its list of problems to every rank."""
    problems = None
    if comm.rank == 0:
        try:
            problems = check()
        except Exception as exc:  # noqa: BLE001 - reported on every rank
            problems = [f"check raised {type(exc).__name__}: {exc}"]
    return comm.bcast(problems)


def ring_exchange(be, nelem: int = 500, rounds: int = 2) -> None:
    """Each rank sends ``rounds`` panels to its right neighbour with put_signal and waits for
    the ones from its left neighbour, then multiplies what it got (raw transport calls)."""
    rank, size = be.rank, be.size
    right, left = (rank + 1) % size, (rank - 1) % size
    buf = be.alloc_symmetric(nelem * rounds, np.float64, name="ring_panel")
    sig = be.alloc_signals(rounds, name="ring_ready")
    try:
        for step in range(rounds):
            src = np.full(nelem, rank + step, dtype=np.float64)
            be.put_signal(buf, step * nelem, src, right, sig, step, 1, "set", be.comm_stream)
        be.quiet(be.comm_stream)
        c = np.zeros((20, 25))
        for step in range(rounds):
            be.signal_wait(sig, step, 1, be.compute, what=f"ring step {step}", peer=left)
            panel = buf.view((20, 25), step * nelem)
            be.gemm(1.0, panel, np.eye(25), 1.0, c, "N", "N", be.compute)
        be.synchronize()
        expected = sum(left + step for step in range(rounds))
        assert np.all(c == expected)
    finally:
        be.free(sig)
        be.free(buf)


def test_trace_of_raw_pipeline(comm, cpu_grid, shared_dir):
    be = cpu_grid.backend
    path = shared_dir / "ring.json"
    with bm.trace(path) as tracer:
        ring_exchange(be)
    # tracing off again: no wrapper left on the backend
    assert not any(name in be.__dict__ for name in STREAM_METHODS + HOST_METHODS)
    assert (tracer.result is not None) == (comm.rank == 0)
    size = comm.size

    def check() -> list[str]:
        data = json.loads(path.read_text())
        problems = structure_problems(data, size)
        events = complete_events(data)
        for rank in range(size):
            mine = [e for e in events if e["pid"] == rank]
            waits = [e for e in mine if e["name"] == "signal_wait"]
            puts = [e for e in mine if e["name"] == "put_signal"]
            gemms = [e for e in mine if e["name"] == "gemm"]
            if len(waits) != 2 or len(puts) != 2 or len(gemms) != 2:
                problems.append(
                    f"rank {rank}: {len(waits)} waits, {len(puts)} put_signals, "
                    f"{len(gemms)} gemms; expected 2 of each"
                )
            for w in waits:
                a = w["args"]
                if (a.get("peer"), a.get("signal"), a.get("value")) != (
                    (rank - 1) % size,
                    "ring_ready",
                    1,
                ) or a.get("index") not in (0, 1):
                    problems.append(f"rank {rank}: signal_wait args {a}")
            for p in puts:
                a = p["args"]
                if (a.get("peer"), a.get("bytes"), a.get("signal")) != (
                    (rank + 1) % size,
                    500 * 8,
                    "ring_ready",
                ):
                    problems.append(f"rank {rank}: put_signal args {a}")
            for g in gemms:
                if g["args"].get("a") != [20, 25] or g["args"].get("c") != [20, 25]:
                    problems.append(f"rank {rank}: gemm args {g['args']}")
            names = {
                e["tid"]: e["args"]["name"]
                for e in data["traceEvents"]
                if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == rank
            }
            # tracks are named "compute"/"comm", prefixed "cpu:"/"gpu:" when both backends
            # live in the process
            streams = {str(names.get(e["tid"])).rsplit(":", 1)[-1] for e in mine}
            if not {"compute", "comm"} <= streams:
                problems.append(f"rank {rank}: tracks {streams}, expected compute and comm")
            # a wait ends no earlier than it began, and the gemm after it starts after it ends
            for w, g in zip(
                sorted(waits, key=lambda e: e["ts"]),
                sorted(gemms, key=lambda e: e["ts"]),
                strict=False,
            ):
                if g["ts"] + _ROUND_US < w["ts"] + w["dur"]:
                    problems.append(f"rank {rank}: gemm started before its signal_wait ended")
        return problems

    problems = shared_verdict(comm, check)
    assert problems == [], "\n".join(problems)


def test_trace_of_gemm(comm, cpu_grid, shared_dir):
    gemm = getattr(bm.linalg, "gemm", None)
    if gemm is None:
        pytest.skip("bm.linalg.gemm is not available yet")
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((37, 29)), rng.standard_normal((29, 31))
    A = bm.from_numpy(a, block=(8, 8), grid=cpu_grid)
    B = bm.from_numpy(b, block=(8, 8), grid=cpu_grid)
    path = shared_dir / "gemm.json"
    with bm.trace(path):
        C = gemm(A, B)
    c = C.to_numpy()
    assert np.allclose(c, a @ b)
    size = comm.size

    def check() -> list[str]:
        data = json.loads(path.read_text())
        problems = structure_problems(data, size)
        events = complete_events(data)
        if not any(e["name"] == "gemm" for e in events):
            problems.append("no local gemm kernel in the trace of a distributed GEMM")
        if size > 1:
            waits = [e for e in events if e["name"] == "signal_wait"]
            if not waits:
                problems.append("no signal_wait in the trace of a multi-rank GEMM")
            for w in waits:
                if "signal" not in w["args"] or "index" not in w["args"]:
                    problems.append(f"signal_wait without signal args: {w['args']}")
                if w["args"].get("peer") is None:
                    problems.append(f"signal_wait without its peer: {w['args']}")
        return problems

    problems = shared_verdict(comm, check)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("op", ["cholesky", "lu_factor"])
def test_trace_of_factorisations(comm, cpu_grid, shared_dir, op):
    """The factorisations' local kernels (POTRF, GETRF) appear in the trace with their shapes."""
    rng = np.random.default_rng(8)
    n = 29
    g = rng.standard_normal((n, n))
    a = g @ g.T + n * np.eye(n) if op == "cholesky" else g
    A = bm.from_numpy(a, block=(8, 8), grid=cpu_grid)
    path = shared_dir / f"{op}.json"
    with bm.trace(path):
        if op == "cholesky":
            bm.linalg.cholesky(A, lower=True)
        else:
            bm.linalg.lu_factor(A)
    kernel = "potrf" if op == "cholesky" else "getrf"

    def check() -> list[str]:
        data = json.loads(path.read_text())
        problems = structure_problems(data, comm.size)
        found = [e for e in complete_events(data) if e["name"] == kernel]
        if not found:
            problems.append(f"no {kernel} kernel in the trace of {op}")
        problems += [
            f"{kernel} without a shape: {e['args']}" for e in found if not e["args"].get("a")
        ]
        return problems

    problems = shared_verdict(comm, check)
    assert problems == [], "\n".join(problems)


def test_missing_signal_writes_partial_trace(comm, cpu_grid, shared_dir):
    be = cpu_grid.backend
    rank, size = comm.rank, comm.size
    peer = (rank + 1) % size
    path = shared_dir / "deadlock.json"
    sig = be.alloc_signals(3, name="never_set")
    saved = be.signal_timeout
    be.signal_timeout = 0.3
    try:
        with pytest.raises(bm.SignalTimeoutError) as info:
            with bm.trace(path):
                be.signal_wait(sig, 2, 5, be.compute, what="test missing signal", peer=peer)
                be.synchronize()
    finally:
        be.signal_timeout = saved
        be.free(sig)  # collective: every rank timed out on its own
    assert not any(name in be.__dict__ for name in STREAM_METHODS + HOST_METHODS)
    partial = path.with_name(f"{path.name}.rank{rank}.partial.json")
    message = str(info.value)
    assert str(partial) in message
    assert f"rank {rank}" in message
    assert "never_set[2]" in message
    assert f"peer {peer}" in message
    assert partial.exists()
    data = json.loads(partial.read_text())
    assert data["otherData"]["partial"] is True
    assert data["otherData"]["rank"] == rank
    procs = [e for e in data["traceEvents"] if e.get("name") == "process_name"]
    assert [e["args"]["name"] for e in procs] == [f"rank {rank}"]
    waits = [e for e in complete_events(data) if e["name"] == "signal_wait"]
    assert len(waits) == 1
    wait = waits[0]
    assert wait["pid"] == rank
    assert wait["args"]["peer"] == peer
    assert wait["args"]["signal"] == "never_set"
    assert wait["args"]["index"] == 2
    assert wait["args"]["value"] == 5
    assert wait["args"]["incomplete"] is True
    assert wait["dur"] >= 0.3e6 * 0.9  # it waited (at least about) the timeout
    # only this rank's file: no collective happened
    comm.Barrier()
    files = sorted(os.listdir(path.parent))
    assert files == sorted(f"deadlock.json.rank{r}.partial.json" for r in range(size))
