"""The nonsymmetric eigenproblem: ``np.linalg.eig``/``np.linalg.eigvals`` and SciPy's
``eig``/``eigvals`` (the standard problem, right eigenvectors).

Route: the matrix gathered on process 0 (``to_numpy(root=0)``), one LAPACK ``xgeev`` there
(NumPy's ``linalg.eig``/``eigvals``) with the BLAS threads of every process of its node
(:meth:`Backend.run_on_root`; the others wait on a polled barrier, their cores free), the
eigenvalues broadcast and kept as a distributed vector, the eigenvectors scattered
(``from_numpy(root=0)``). ``O(n^2)`` memory on process 0 only; no device work on the GPU
backend (the gathered matrix is a host array, and LAPACK's ``xgeev`` runs on the host).

Why gathered: the nonsymmetric QR algorithm does not distribute at BLAS3 speed -- ScaLAPACK
has no ``p?geev`` (only the Hessenberg reduction ``p?gehrd`` and the Schur form of a Hessenberg
matrix ``p?hseqr``), and its users gather for eigenvectors too -- so at the sizes one node
holds, one LAPACK call with the node's cores is the fast route, as in ``eigh``'s gathered route
(``docs/eigh.md``).

NumPy's results: the dtypes of the installed NumPy's own ``eig`` on the gathered matrix (up to
NumPy 2.4 real eigenvalues and eigenvectors for real input whose eigenvalues are all real,
complex ones otherwise; NumPy 2.5 returned complex ones for real input with a real spectrum
too, measured on the GPU node); SciPy's: complex eigenvalues always. Every process gets the same
dtype and the same bytes (process 0 computes, the others receive).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dispatch import implements
from ...array import BlockCyclicArray, blas_dtype
from ...creation import from_numpy
from ..engine import _checks as ck
from ..engine._vectors import from_host

__all__ = ["eig", "eigvals"]


def eig(
    a: BlockCyclicArray,
    b: Any = None,
    left: bool = False,
    right: bool = True,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    homogeneous_eigvals: bool = False,
) -> Any:
    """Eigenvalues and right eigenvectors of the square ``a`` (SciPy's ``eig`` for the standard
    problem, LAPACK ``xgeev``). Collective.

    Parameters
    ----------
    a : BlockCyclicArray
        ``n x n``, any grid and blocks, views included (gathered). Integer and bool input is
        computed in float64.
    b : None
        Only None: the generalized problem is not implemented.
    left : bool
        Only False (see the ``NotImplementedError`` for the left eigenvectors).
    right : bool
        Return the right eigenvectors (normalised to unit 2-norm, as LAPACK's).
    overwrite_a, overwrite_b : bool
        Accepted; ``a`` is never written.
    check_finite : bool
        ``ValueError`` on every rank if ``a`` holds NaN or inf.
    homogeneous_eigvals : bool
        Only False.

    Returns
    -------
    w : BlockCyclicArray
        The ``n`` eigenvalues, a complex 1-D distributed vector, in LAPACK's order.
    vr : BlockCyclicArray
        ``n x n``, column ``i`` the eigenvector of ``w[i]`` (only with ``right``), in square
        blocks of ``a``'s row block on ``a``'s grid; in the dtype the installed NumPy's
        ``eig`` gives them (real for real input whose eigenvalues are all real up to NumPy
        2.4, as SciPy's).
    """
    op = "eig"
    a = ck.check_square_matrix(a, op)
    _refuse(b, left, homogeneous_eigvals, op)
    ck.check_flag(overwrite_a, "overwrite_a")
    ck.check_flag(overwrite_b, "overwrite_b")
    vectors = ck.check_flag(right, "right")
    w, v = _solve(a, vectors, ck.check_flag(check_finite, "check_finite"), op)
    w = w if np.dtype(w.dtype).kind == "c" else w.astype(np.result_type(w.dtype, np.complex64))
    return (w, v) if vectors else w


def eigvals(
    a: BlockCyclicArray,
    b: Any = None,
    overwrite_a: bool = False,
    check_finite: bool = True,
    homogeneous_eigvals: bool = False,
) -> BlockCyclicArray:
    """Eigenvalues of the square ``a`` (SciPy's ``eigvals``): :func:`eig` without
    eigenvectors. Collective."""
    return eig(  # type: ignore[no-any-return]
        a, b, False, False, overwrite_a, False, check_finite, homogeneous_eigvals
    )


@implements(np.linalg.eig)
def _np_eig(a: Any) -> Any:
    """``np.linalg.eig(A)``: NumPy's ``EigResult(eigenvalues, eigenvectors)``."""
    w, v = _solve(ck.check_square_matrix(a, "np.linalg.eig"), True, True, "np.linalg.eig")
    try:
        from numpy.linalg._linalg import EigResult

        return EigResult(w, v)  # type: ignore[arg-type]
    except ImportError:  # NumPy < 2
        return w, v


@implements(np.linalg.eigvals)
def _np_eigvals(a: Any) -> BlockCyclicArray:
    """``np.linalg.eigvals(A)``: the eigenvalues as a distributed vector."""
    op = "np.linalg.eigvals"
    return _solve(ck.check_square_matrix(a, op), False, True, op)[0]


def _refuse(b: Any, left: Any, homogeneous: Any, op: str) -> None:
    if b is not None:
        raise NotImplementedError(
            f"{op}: b is given: the generalized eigenproblem a v = w b v is not implemented; "
            "call it with b=None"
        )
    if ck.check_flag(left, "left"):
        raise NotImplementedError(
            f"{op}: left=True is not supported: the left eigenvectors of a are the right "
            "eigenvectors of a.conj().T (for the conjugated eigenvalues): call "
            "eig(a.conj().T) and match the eigenvalues"
        )
    if ck.check_flag(homogeneous, "homogeneous_eigvals"):
        raise NotImplementedError(
            f"{op}: homogeneous_eigvals=True is not supported; the eigenvalues w are (w, 1)"
        )


def _solve(
    a: BlockCyclicArray, vectors: bool, finite: bool, op: str
) -> tuple[BlockCyclicArray, BlockCyclicArray | None]:
    grid, be = a.grid, a.backend
    dt = blas_dtype(a.dtype)
    x = a.astype(dt) if a.dtype != dt else a
    if finite:
        ck.check_finite(x, None, op)
    nb = int(x.block[0])
    full = x.to_numpy(root=0)

    def solve() -> tuple[np.ndarray, np.ndarray | None]:
        assert full is not None  # process 0 holds the gathered matrix
        if vectors:
            w, v = np.linalg.eig(full)
            return w, v
        return np.linalg.eigvals(full), None

    found = be.run_on_root(solve)
    w_host = np.asarray(be.bcast(None if found is None else found[0], root=0))
    w = from_host(w_host, nb, grid)
    if not vectors:
        return w, None
    v_host = None if found is None else found[1]
    vdt = np.result_type(w_host.dtype, dt)
    v = from_numpy(v_host, block=(nb, nb), grid=grid, root=0, dtype=vdt)
    return w, v
