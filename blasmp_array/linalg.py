"""Public linear-algebra namespace: the distributed BLAS3 set with PBLAS semantics and
NumPy-style keywords, plus :func:`matmul` (what ``A @ B`` and ``np.matmul`` call).

==============================  =========================================  ==============
function                        operation                                  flops
==============================  =========================================  ==============
:func:`gemm`                    ``C := alpha op(A) op(B) + beta C``        ``2 m n k``
:func:`symm`                    ``C := alpha A B + beta C`` (A symmetric)  ``2 m^2 n``
:func:`syrk`                    ``C := alpha op(A) op(A)^T + beta C``      ``n^2 k``
:func:`syr2k`                   ``C := alpha (A B^T + B A^T) + beta C``    ``2 n^2 k``
:func:`trmm`                    ``alpha op(A) B`` (A triangular)           ``m^2 n``
:func:`trsm`                    solve ``op(A) X = alpha B``                ``m^2 n``
:func:`solve_triangular`        SciPy's signature on top of :func:`trsm`
:func:`cholesky`                ``A = U^H U`` (or ``L L^H``), SciPy's API   ``n^3 / 3``
:func:`cho_factor`              the factor for :func:`cho_solve`            ``n^3 / 3``
:func:`cho_solve`               solve with the factor (two TRSMs)          ``2 n^2 k``
:func:`solve`                   LU ('gen', the default); 'pos': Cholesky
:func:`lu_factor`               ``A = P L U`` (partial pivoting)           ``2 n^3 / 3``
:func:`lu_solve`                solve with the factor (two TRSMs)          ``2 n^2 k``
:func:`inv`                     the inverse (LU, then ``lu_solve``)        ``2 n^3``
:func:`det`                     the determinant (LU's diagonal)            ``2 n^3 / 3``
:func:`qr`                      ``A = Q R`` (CholeskyQR2 or Householder)   ``4 m n^2``
:func:`qr_multiply`             ``Q c`` / ``c Q`` without forming ``Q``
:func:`eigh`                    ``A = V diag(w) V^H`` (Hermitian)          ``4/3 n^3 + 2 n^3``
:func:`eigvalsh`                the eigenvalues of a Hermitian matrix      ``4/3 n^3``
:func:`lstsq`                   least squares (QR, LQ; SVD for 'gelsd')
:func:`svd`                     ``A = U diag(s) V^H``                      ``4mn^2 + 8n^3``
:func:`svdvals`                 the singular values
==============================  =========================================  ==============

The solvers take NumPy's operands: a vector right-hand side ``b`` (``ndim == 1``) gives a vector
solution; an ndarray beside a BlockCyclicArray is taken to be the same on every rank (checked
by one collective) and distributed to fit; integer and bool input is computed in float64.
"""

from __future__ import annotations

from typing import Any

from .ops.blas3.gemm import gemm
from .ops.blas3.matmul import matmul
from .ops.blas3.symm import symm
from .ops.blas3.syr2k import syr2k
from .ops.blas3.syrk import syrk
from .ops.blas3.trmm import trmm

# the SVD and the functions on top of it register NumPy's np.linalg.svd, svdvals, norm orders,
# cond, matrix_rank, pinv and lstsq when imported
from .ops.face import spectral as _spectral  # noqa: F401
from .ops.lapack import svd as _svd  # noqa: F401

__all__ = [  # noqa: F822
    "gemm",
    "symm",
    "syrk",
    "syr2k",
    "trmm",
    "trsm",
    "solve_triangular",
    "matmul",
    "cholesky",
    "cho_factor",
    "cho_solve",
    "solve",
    "lu_factor",
    "lu_solve",
    "inv",
    "det",
    "qr",
    "qr_multiply",
    "lstsq",
    "eigh",
    "eigvalsh",
    "eig",
    "eigvals",
    "svd",
    "svdvals",
]


def __getattr__(name: str) -> Any:
    # the solvers live in ops/blas3/trsm.py, ops/lapack/cholesky.py and ops/lapack/lu.py; their
    # entry points with NumPy's operands (vector right-hand sides, replicated ndarrays, integer
    # input) in ops/lapack/solves.py (imported lazily so this namespace imports without them)
    from .ops.lapack import solves

    if name in solves.PUBLIC:
        return solves.PUBLIC[name]
    # QR and least squares live in ops/lapack/qr.py (imported lazily likewise)
    if name in ("svd", "svdvals"):
        return getattr(_svd, name)
    if name == "lstsq":  # QR (the default) or, with lapack_driver='gelsd', the SVD
        return _spectral.lstsq
    if name in ("qr", "qr_multiply"):
        from .ops.lapack import qr as _qr

        return getattr(_qr, name)
    # the Hermitian eigensolver lives in ops/lapack/eigh.py (imported lazily likewise)
    if name in ("eigh", "eigvalsh"):
        from .ops.lapack import eigh as _eigh

        return getattr(_eigh, name)
    if name in ("eig", "eigvals"):  # the nonsymmetric eigenproblem: ops/lapack/eig.py
        from .ops.lapack import eig as _eig

        return getattr(_eig, name)
    raise AttributeError(f"module 'blasmp_array.linalg' has no attribute {name!r}")
