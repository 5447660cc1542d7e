"""The linear-algebra entry points with NumPy's operands: vector right-hand sides, replicated
ndarrays and integer input.

The solvers (:mod:`.trsm`, :mod:`.cholesky`, :mod:`.lu`) work on 2-D BlockCyclicArrays of the
four BLAS dtypes. Their public entry points -- ``bm.linalg.solve``, ``solve_triangular``,
``cho_solve``, ``lu_solve``, ``trsm``, the factorisations, and NumPy's ``np.linalg.solve``,
``inv``, ``det``, ``slogdet``, ``cholesky`` -- are wrapped here (:func:`linalg_entry`):

* a vector right-hand side ``b`` (``ndim == 1``) is solved as its ``n x 1`` column face and
  the solution returned as a vector, as NumPy and SciPy return it;
* an ndarray beside a BlockCyclicArray is taken to be the same on every rank (one collective
  checks it, :mod:`._replicated`) and distributed to fit: a right-hand side with its rows
  blocked like the matrix's rows, a matrix in the right-hand side's row blocks;
* integer and bool input is promoted to float64, as ``np.linalg`` promotes it (a copy).

SciPy's :func:`solve` itself lives here too: its ``assume_a`` picks Cholesky or LU.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._dispatch import wrap_implementation
from ...array import BLAS_DTYPES, BlockCyclicArray, as_vector
from ...layout import BlockCyclicLayout
from ..blas3 import trsm
from ..engine import _checks as ck
from ..engine import _factor_block
from ..engine._replicated import check_replicated, distribute, is_replicated, replicated
from ..engine._vectors import vector_layout
from . import cholesky, lu

__all__ = ["linalg_entry", "promote", "solve", "inv", "det"]


def promote(x: Any) -> Any:
    """``x`` in a BLAS dtype: integer and bool arrays as float64 copies, others unchanged."""
    if isinstance(x, BlockCyclicArray) and x.dtype not in BLAS_DTYPES:
        return x.astype(np.float64)
    return x


def _matrix_of(a: Any) -> Any:
    """The matrix ``a`` of a factor pair ``(c, lower)`` / ``(lu, piv)``, or ``a`` itself."""
    if isinstance(a, tuple) and a and isinstance(a[0], BlockCyclicArray):
        return a[0]
    return a


def _distributed_rhs(b: Any, a: BlockCyclicArray, what: str) -> BlockCyclicArray:
    """The replicated right-hand side ``b`` with its rows blocked like ``a``'s rows."""
    g, rb = a.grid, a.block[0]
    if b.ndim == 1:
        return as_vector(distribute(b.reshape(-1, 1), vector_layout(b.shape[0], rb, g), g))
    if b.ndim != 2:
        raise ValueError(f"{what}: b must be a vector or a matrix, got shape {tuple(b.shape)}")
    return distribute(b, BlockCyclicLayout(tuple(b.shape), (rb, rb), g.shape), g)  # type: ignore[arg-type]


def _distributed_matrix(a: Any, b: BlockCyclicArray, what: str) -> BlockCyclicArray:
    """The replicated matrix ``a`` in square blocks of ``b``'s row block."""
    if a.ndim != 2:
        raise ValueError(f"{what}: a must be a matrix, got shape {tuple(a.shape)}")
    rb, g = b.block[0], b.grid
    return distribute(a, BlockCyclicLayout(tuple(a.shape), (rb, rb), g.shape), g)  # type: ignore[arg-type]


def _operands(a: Any, b: Any, what: str) -> tuple[Any, Any]:
    """``a`` (a matrix, or a factor pair) and the right-hand side ``b`` with replicated
    ndarrays distributed to fit the BlockCyclicArray among them (after the cross-rank
    check)."""
    mat = _matrix_of(a)
    hosts = [x for x in (mat, b) if is_replicated(x)]
    if not hosts:
        return a, b
    partner = mat if isinstance(mat, BlockCyclicArray) else b
    if not isinstance(partner, BlockCyclicArray):
        raise TypeError(
            f"{what}: no BlockCyclicArray operand; distribute one with bm.from_numpy (or call "
            "NumPy/SciPy on NumPy arrays)"
        )
    check_replicated([replicated(h) for h in hosts], partner.grid, what)
    if is_replicated(b):
        b = _distributed_rhs(b, mat, what)
    if is_replicated(mat):
        new = _distributed_matrix(mat, b, what)
        a = (new, *a[1:]) if isinstance(a, tuple) else new
    return a, b


def _promote_pair(a: Any) -> Any:
    if isinstance(a, tuple) and a and isinstance(a[0], BlockCyclicArray):
        return (promote(a[0]), *a[1:])
    return promote(a)


def linalg_entry(fn: Callable[..., Any], name: str, rhs: str | None = "b") -> Callable[..., Any]:
    """``fn`` (a solver or factorisation whose first parameter is the matrix, or a factor pair,
    and whose right-hand side is the parameter ``rhs``, if any) with NumPy's operands: vector
    and replicated right-hand sides, replicated matrices, integer input promoted to float64
    (see the module doc). The signature and docstring stay ``fn``'s."""
    sig = inspect.signature(fn)
    params = list(sig.parameters)

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        first = params[0]
        a = bound.arguments[first]
        if rhs is None:
            bound.arguments[first] = _promote_pair(_matrix_or_host(a, name))
            return fn(*bound.args, **bound.kwargs)
        b = bound.arguments.get(rhs)
        a, b = _operands(a, b, name)
        vector = isinstance(b, BlockCyclicArray) and b.ndim == 1
        if vector and name == "trsm" and _side(bound.arguments.get("side", "left")) == "R":
            b = b._column.T  # x op(A) = b: a 1 x n row
        elif vector:
            b = b._column
        bound.arguments[first] = _promote_pair(a)
        bound.arguments[rhs] = promote(b)
        x = fn(*bound.args, **bound.kwargs)
        return as_vector(x) if vector else x

    return entry


def _side(side: Any) -> str:
    return "R" if isinstance(side, str) and side.lower() in ("r", "right") else "L"


def _matrix_or_host(a: Any, what: str) -> Any:
    if is_replicated(a):
        raise TypeError(
            f"{what}: a is a {type(a).__name__}; distribute it with bm.from_numpy (or call "
            "NumPy/SciPy on it)"
        )
    return a


# -- solve: SciPy's assume_a picks the factorization ---------------------------------------------
_POS = ("pos", "positive definite")
#: routed to :func:`blasmp_array.ops.lapack.lu.solve` (no symmetric-indefinite factorisation yet)
_LU = ("gen", "general", "sym", "symmetric", "her", "hermitian")


def solve(
    a: BlockCyclicArray,
    b: BlockCyclicArray,
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    assume_a: str = "gen",
) -> BlockCyclicArray:
    """Solve ``a x = b`` (SciPy's ``solve``). Collective.

    ``assume_a='gen'`` (the default, as in SciPy) runs LU with partial pivoting
    (:func:`blasmp_array.ops.lapack.lu.solve`; ``lower`` is then ignored), and so do ``'sym'`` and
    ``'her'`` until a symmetric-indefinite factorisation exists. ``'pos'`` (a Hermitian
    positive definite ``a``, about half of LU's flops) runs Cholesky
    (:func:`~blasmp_array.ops.lapack.cholesky.factor_working`) then
    :func:`~blasmp_array.ops.lapack.cholesky.cho_solve`. Other values raise
    ``NotImplementedError`` on every rank.

    Parameters
    ----------
    a : BlockCyclicArray
        ``n x n``; for ``'pos'`` only the ``lower`` (default: upper) triangle is read.
    b : BlockCyclicArray
        ``n x k`` right-hand sides on ``a``'s grid.
    lower, overwrite_a, overwrite_b, check_finite
        As in :func:`scipy.linalg.solve`.
    assume_a : {'pos', 'positive definite', 'gen', 'sym', 'her'}

    Returns
    -------
    x : BlockCyclicArray
        ``n x k``.

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``a`` is not positive definite (every rank; the order of the failing minor), or
        exactly singular for the LU routes (the zero pivot's column).
    NotImplementedError
        For any other ``assume_a``.

    Notes
    -----
    ``n^3 / 3 + 2 n^2 k`` flops for ``'pos'``, ``2 n^3 / 3 + 2 n^2 k`` for LU.
    """
    if isinstance(assume_a, str) and assume_a.lower() in _LU:
        return lu.solve(a, b, overwrite_a, overwrite_b, check_finite, assume_a)
    if not isinstance(assume_a, str) or assume_a.lower() not in _POS:
        raise NotImplementedError(
            f"solve: assume_a={assume_a!r} is not implemented; 'pos' (a Hermitian positive "
            "definite a, solved by Cholesky) and 'gen', 'sym', 'her' (LU with partial "
            "pivoting) are available"
        )
    b = ck.check_array(b, "b", "solve")
    if b.shape[0] != getattr(a, "shape", (b.shape[0],))[0]:
        raise ValueError(f"solve: b has {b.shape[0]} rows but a is {a.shape[0]}x{a.shape[1]}")
    low = ck.check_flag(lower, "lower")
    ck.check_flag(overwrite_b, "overwrite_b")
    c, back = cholesky.factor_working(a, low, overwrite_a, check_finite, 2, "solve")
    if back is not None and not _factor_block.plain(b):
        c, back = _factor_block.to_block(c, *back), None
    if back is None:
        return cholesky.cho_solve((c, low), b, overwrite_b=overwrite_b, check_finite=check_finite)
    # solved in the factor's working block: b there and x back (docs/defaults.md)
    bw = _factor_block.to_block(b, c.block[0])
    x = cholesky.cho_solve(
        (c, low), bw, overwrite_b=bool(overwrite_b) or bw is not b, check_finite=check_finite
    )
    return x if x.block == b.block else _factor_block.to_block(x, *b.block)


# -- the public entry points, wrapped ------------------------------------------------------------
solve_triangular = linalg_entry(trsm.solve_triangular, "solve_triangular")
trsm_ = linalg_entry(trsm.trsm, "trsm", rhs="B")
solve_ = linalg_entry(solve, "solve")
cho_solve = linalg_entry(cholesky.cho_solve, "cho_solve")
lu_solve = linalg_entry(lu.lu_solve, "lu_solve")
cholesky_ = linalg_entry(cholesky.cholesky, "cholesky", rhs=None)
cho_factor = linalg_entry(cholesky.cho_factor, "cho_factor", rhs=None)
lu_factor = linalg_entry(lu.lu_factor, "lu_factor", rhs=None)


def inv(a: BlockCyclicArray, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """SciPy's ``inv``: the inverse of the square ``a`` by LU (``np.linalg.inv``'s
    computation), after SciPy's ``check_finite`` (NaN or inf: ``ValueError`` on every rank).
    ``overwrite_a`` is accepted; ``a`` is never written. Singular: ``LinAlgError``."""
    return _scipy_entry(np.linalg.inv, "inv", a, overwrite_a, check_finite)


def det(a: BlockCyclicArray, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """SciPy's ``det``: the determinant of the square ``a`` by LU, a NumPy scalar on every rank
    (``np.linalg.det``'s computation), after SciPy's ``check_finite``. ``overwrite_a`` is
    accepted; ``a`` is never written."""
    return _scipy_entry(np.linalg.det, "det", a, overwrite_a, check_finite)


def _scipy_entry(fn: Any, name: str, a: Any, overwrite_a: Any, check_finite: Any) -> Any:
    ck.check_flag(overwrite_a, "overwrite_a")
    if ck.check_flag(check_finite, "check_finite"):  # SciPy's order: finite, then square (fn)
        a = promote(ck.check_array(a, "a", name))  # promoted once: fn's entry keeps it
        ck.check_finite(a, None, name)
    return fn(a)


#: what ``bm.linalg`` exports under these names
PUBLIC = {
    "inv": inv,
    "det": det,
    "solve_triangular": solve_triangular,
    "trsm": trsm_,
    "solve": solve_,
    "cho_solve": cho_solve,
    "lu_solve": lu_solve,
    "cholesky": cholesky_,
    "cho_factor": cho_factor,
    "lu_factor": lu_factor,
}


def _np_entry(name: str, rhs: str | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrapper(impl: Callable[..., Any]) -> Callable[..., Any]:
        return linalg_entry(impl, name, rhs)

    return wrapper


wrap_implementation(np.linalg.solve, _np_entry("np.linalg.solve", "b"))
for _f, _n in (
    (np.linalg.inv, "np.linalg.inv"),
    (np.linalg.det, "np.linalg.det"),
    (np.linalg.slogdet, "np.linalg.slogdet"),
    (np.linalg.cholesky, "np.linalg.cholesky"),
):
    wrap_implementation(_f, _np_entry(_n, None))
