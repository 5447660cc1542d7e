"""The Heat baseline of ``--compare`` (``heat``, over MPI on the job's ranks).

GEMM is ``heat.matmul(A, B)`` with ``A`` split along its rows and ``B`` along its rows
(:data:`GEMM_SPLITS`); ``op(A)`` is materialised before the timing (Heat's ``matmul`` has no
transpose flag). TRSM is ``heat.linalg.solve_triangular(U, B)``, with ``U`` and ``B`` split
along their rows (:data:`TRSM_SPLITS`); Heat 1.8 solves only *upper* triangular
systems *from the left*, so any other case is handed to it as the equivalent left upper system
(:func:`upper_left_form`: a transpose for ``side='right'``, a reversal of rows and columns for a
lower triangle), formed on the host before the timing and undone on the gathered result.

Both operands are broadcast from rank 0 and each rank keeps its slice (``heat.array(x,
split=...)``), outside the timing. The call runs on the CPU with Torch's intra-op thread count of
each rank (``OMP_NUM_THREADS``), on the grid's communicator.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from .mpi_run import MpiRun, bcast_matrix

__all__ = ["GEMM_SPLITS", "TRSM_SPLITS", "unusable", "prepare", "upper_left_form"]

#: ``(A.split, B.split)`` of GEMM: both operands distributed by rows. On 2 ranks at n = 4096
#: the four pairs of splits 0/1 ran within the noise of each other (docs/_measurements/
#: bench-cpu-n4096-compare/heat-splits-pilot.txt)
GEMM_SPLITS = (0, 0)
#: ``(U.split, B.split)`` of TRSM (Heat needs ``B`` split by rows or not at all); ``U`` split by
#: rows was the faster of the two in the same pilot
TRSM_SPLITS = (0, 0)


def unusable(case: Any, comm: Any = None) -> str | None:
    """Why Heat cannot run here (``None`` when it can); ``comm`` is not needed."""
    if importlib.util.find_spec("heat") is None:
        return "not installed"
    try:
        ht: Any = importlib.import_module("heat")
    except Exception as exc:  # noqa: BLE001 - e.g. torch or torchvision missing or broken
        return f"not importable: {type(exc).__name__}: {exc}"
    if case.op == "trsm" and not hasattr(ht.linalg, "solve_triangular"):
        return f"heat {ht.__version__} has no distributed triangular solve; TRSM not measured"
    return None


def upper_left_form(
    case: Any, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """The TRSM of ``case`` on ``(a, b)`` as an upper triangular system solved from the left.

    Returns ``(u, rhs, undo)``: ``u`` upper triangular (zeros below the diagonal), and
    ``undo(y)`` maps the solution ``y`` of ``u y = rhs`` to the solution ``x`` of the case
    (``op(T) x = b``, or ``x op(T) = b`` for ``side='right'``, with ``T`` the triangle of ``a``
    named by ``case.lower``). With ``J`` the reversal of rows, a lower ``L`` gives the upper
    ``J L J`` and ``L x = b`` becomes ``(J L J)(J x) = J b``; ``x T = b`` becomes
    ``T^T x^T = b^T``.
    """
    tri = np.tril(a) if case.lower else np.triu(a)
    if case.trans == "N":
        t, lower = tri, case.lower
    else:
        t = tri.T if case.trans == "T" else tri.conj().T
        lower = not case.lower
    left = case.side == "left"
    if not left:
        t, b, lower = t.T, b.T, not lower
    flip = lower
    if flip:
        t, b = t[::-1, ::-1], b[::-1]

    def undo(y: np.ndarray) -> np.ndarray:
        x = y[::-1] if flip else y
        return np.ascontiguousarray(x if left else x.T)

    return np.ascontiguousarray(np.triu(t)), np.ascontiguousarray(b), undo


def prepare(p: Any, gathered: dict[str, np.ndarray] | None, comm: Any) -> MpiRun:
    """Heat's GEMM or TRSM on the operands of ``p`` (collective)."""
    import torch

    ht: Any = importlib.import_module("heat")  # Any: Heat's stubs lack some of what runs
    case = p.case
    hcomm = ht.communication.MPICommunication(comm)
    rank0 = comm.Get_rank() == 0
    g = gathered if rank0 else None
    undo: Callable[[np.ndarray], np.ndarray] = lambda y: y  # noqa: E731
    if case.op == "gemm":
        from .operators import _op

        opa = np.ascontiguousarray(_op(g["A"], case.trans)) if g is not None else None
        a = bcast_matrix(comm, opa)
        b = bcast_matrix(comm, g["B"] if g is not None else None)
        sa, sb = GEMM_SPLITS
        x = ht.array(a, split=sa, comm=hcomm)
        y = ht.array(b, split=sb, comm=hcomm)
        call = lambda: ht.matmul(x, y)  # noqa: E731
        how = f"matmul, A split {sa}, B split {sb}"
        if case.trans != "N":
            how += f"; op(A) ({case.trans}) materialised before the timing"
    else:
        u = rhs = None
        if g is not None:
            u, rhs, undo = upper_left_form(case, g["A"], g["B"])
        su, sb = TRSM_SPLITS
        x = ht.array(bcast_matrix(comm, u), split=su, comm=hcomm)
        y = ht.array(bcast_matrix(comm, rhs), split=sb, comm=hcomm)
        call = lambda: ht.linalg.solve_triangular(x, y)  # noqa: E731
        how = f"linalg.solve_triangular, U split {su}, B split {sb}"
        if case.side != "left" or case.lower or case.trans != "N":
            how += (
                "; Heat solves upper left systems only: given the equivalent one "
                "(reversal/transpose before the timing)"
            )

    def gather(out: Any) -> np.ndarray | None:
        full = out.numpy()  # collective: every rank gets the matrix
        return undo(full) if rank0 else None

    blas = "MKL" if torch.backends.mkl.is_available() else "Torch's BLAS"
    threads = torch.get_num_threads()
    note = (
        f"heat {ht.__version__} {how}; torch {torch.__version__} ({blas}) on the CPU, "
        f"{comm.Get_size()} ranks x {threads} thread(s)"
    )
    return MpiRun(call=call, gather=gather, note=note, threads=threads)
