"""``BLASMP_TRACE=path`` traces a whole script and writes the trace at exit (one process and,
through mpiexec, two)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import numpy as np
import blasmp_array as bm
be = bm.ProcessGrid(backend="cpu").backend
r, p = be.rank, be.size
buf = be.alloc_symmetric(64, np.float64, name="panel")
sig = be.alloc_signals(1, name="ready")
be.put_signal(buf, 0, np.ones(64), (r + 1) % p, sig, 0, 1, "set", be.comm_stream)
be.signal_wait(sig, 0, 1, be.compute, what="env test", peer=(r - 1) % p)
be.synchronize()
be.free(sig)
be.free(buf)
"""


def run(cmd: list[str], trace: Path) -> None:
    env = dict(os.environ, BLASMP_TRACE=str(trace), BLASMP_BACKEND="cpu", OMP_NUM_THREADS="1")
    env.pop("BLASMP_UNDER_MPIEXEC", None)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def check(trace: Path, nranks: int) -> None:
    data = json.loads(trace.read_text())
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    assert sorted({e["pid"] for e in events}) == list(range(nranks))
    for rank in range(nranks):
        waits = [e for e in events if e["pid"] == rank and e["name"] == "signal_wait"]
        assert len(waits) == 1
        assert waits[0]["args"]["peer"] == (rank - 1) % nranks
        assert waits[0]["args"]["signal"] == "ready"


def test_env_trace_single_process(tmp_path: Path) -> None:
    trace = tmp_path / "run.json"
    run([sys.executable, "-c", SCRIPT], trace)
    check(trace, 1)


@pytest.mark.mpi
def test_env_trace_two_ranks(tmp_path: Path) -> None:
    from test_mpi import mpiexec

    trace = tmp_path / "run.json"
    run([mpiexec(), "-n", "2", sys.executable, "-c", SCRIPT], trace)
    check(trace, 2)
