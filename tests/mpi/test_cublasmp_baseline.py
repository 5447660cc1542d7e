"""The cuBLASMp baseline of ``--compare`` (:mod:`blasmp_array.bench.cublasmp_adapter`).

On the GPU backend with one GPU per rank and cuBLASMp/NCCL >= 2.29 installed (the GPU node with
``tools/fetch-cublasmp-wheels.sh``), each case runs cuBLASMp on blasmp_array's operands and its
result must pass the bench's own check (GEMM componentwise, TRSM backward error) and agree with
blasmp_array's result within the sum of both bounds. Where ranks share a GPU, the baseline must be
refused with NCCL's reason on every rank; on the CPU backend, with the host-memory reason.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pytest

from blasmp_array.bench import cublasmp_adapter
from blasmp_array.bench.mpi_baselines import measure_mpi_baselines
from blasmp_array.bench.operators import Case, flop_count, prepare

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpu_baselines import library_runs_here  # noqa: E402

BACKEND = os.environ.get("BLASMP_BACKEND", "cpu")

CASES = [
    Case("gemm", 37, 29, 23, block=(8, 8)),  # (8, 5) blocks: INVALID_VALUE from cuBLASMp 0.9.1
    Case("gemm", 24, 24, 24, dtype="float32", trans="T", block=(8, 8)),
    Case("trsm", 37, 29, 0, block=(8, 8)),
    Case("trsm", 24, 24, 0, dtype="complex128", side="right", lower=False, block=(8, 8)),
]


def _cublasmp_entry(comm, case: Case, warmup: int, repeat: int) -> dict:
    """cuBLASMp's entry of ``--compare`` for ``case``, checked against blasmp_array's result."""
    p = prepare(case)
    p.run()
    gathered = {name: x.to_numpy(root=0) for name, x in p.inputs.items()}
    ours = p.result.to_numpy(root=0)
    if comm.Get_rank() != 0:
        gathered = None
    (entry,) = measure_mpi_baselines(
        p, gathered, ours, comm, warmup, repeat, flop_count(case), ("cublasmp",), True
    )
    return entry


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label())
def test_cublasmp_on_blasmp_array_operands(comm, case):
    case = replace(case, backend=BACKEND)
    if not library_runs_here(comm, BACKEND, cublasmp_adapter.unusable(case, comm), "cuBLASMp"):
        return
    entry = _cublasmp_entry(comm, case, warmup=1, repeat=2)
    assert entry["median_s"] is not None, entry["note"]
    assert entry["check"]["passed"], entry
    assert entry["check"]["vs_blasmp_eps"] <= entry["check"]["vs_blasmp_bound_eps"]
    assert "cublasMp" in entry["note"] and "NCCL" in entry["note"]


def test_cublasmp_blocks_it_refuses_are_named(comm):
    """A layout cuBLASMp 0.9.1 rejects (A's column blocks unlike B's row blocks) is either
    measured correctly by a later cuBLASMp or reported with the blocks, never a crash."""
    case = Case("gemm", 37, 29, 23, block=(8, 5), backend=BACKEND)
    if BACKEND != "gpu" or cublasmp_adapter.unusable(case, comm) is not None:
        pytest.skip("cuBLASMp not usable here")
    entry = _cublasmp_entry(comm, case, warmup=0, repeat=1)
    if entry["median_s"] is None:
        assert "cuBLASMp refused the operands (blocks A (8, 5), B (8, 5))" in entry["note"], entry
    else:
        assert entry["check"]["passed"], entry
