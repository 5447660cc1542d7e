"""The cuSOLVERMp baseline of ``--compare`` (:mod:`blasmp_array.bench.cusolvermp_adapter`).

On the GPU backend with one GPU per rank and cuSOLVERMp, cuBLASMp and NCCL >= 2.29 installed (the
GPU node with ``tools/fetch-cublasmp-wheels.sh``), each case runs cuSOLVERMp's Cholesky, LU or
``syevd`` on blasmp_array's operand and its result must pass the bench's own check (backward
error; for LU with cuSOLVERMp's pivots gathered as SciPy's ``piv``; LAPACK's tester ratios for
``syevd``). Where ranks share a GPU, the baseline must be refused with NCCL's reason on every
rank; on the CPU backend, with the host-memory reason.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pytest

from blasmp_array.bench import cusolvermp_adapter
from blasmp_array.bench.mpi_baselines import measure_mpi_baselines
from blasmp_array.bench.operators import Case, flop_count, prepare

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpu_baselines import library_runs_here  # noqa: E402

BACKEND = os.environ.get("BLASMP_BACKEND", "cpu")

CASES = [
    Case("cholesky", 40, 40, 40, block=(8, 8)),
    Case("cholesky", 37, 37, 37, dtype="complex128", lower=False, block=(8, 8)),
    Case("lu", 40, 40, 40, block=(8, 8)),
    Case("lu", 37, 37, 37, dtype="float32", block=(8, 8)),
    Case("eigh", 40, 40, 40, block=(8, 8)),
    Case("eigh", 37, 37, 37, dtype="complex128", block=(8, 8)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label())
def test_cusolvermp_on_blasmp_array_operands(comm, case):
    case = replace(case, backend=BACKEND)
    if not library_runs_here(comm, BACKEND, cusolvermp_adapter.unusable(case, comm), "cuSOLVERMp"):
        return
    p = prepare(case)
    p.run()
    gathered = {name: x.to_numpy(root=0) for name, x in p.inputs.items()}
    if comm.Get_rank() != 0:
        gathered = None
    (entry,) = measure_mpi_baselines(
        p, gathered, None, comm, 1, 2, flop_count(case), ("cusolvermp",), True
    )
    assert entry["median_s"] is not None, entry["note"]
    assert entry["check"]["passed"], entry
    assert "cusolverMp" in entry["note"] and "NCCL" in entry["note"]
