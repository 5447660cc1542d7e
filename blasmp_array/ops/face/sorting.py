"""``np.sort``, ``np.argsort``, ``np.unique`` and the order statistics (``np.median``,
``np.percentile``, ``np.quantile``) of distributed vectors.

A vector is ``O(n)`` numbers (where a matrix of that order is ``n^2``), so these gather it on
every rank (``x.to_numpy()``), let NumPy sort it there -- every rank the same bytes with the
same NumPy, so every rank the same order, ties and NaNs included -- and distribute the result in
the vector's blocks (each rank keeps the elements it stores). The results are NumPy's: the same
values, order, dtypes and shapes. Matrices are refused: sorting along an axis of a distributed
matrix moves ``n^2`` elements, and ``np.unique`` of a matrix flattens it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dispatch import implements
from ...array import BlockCyclicArray
from ..engine._vectors import from_host
from .reductions import _no_extras, _require

__all__: list[str] = []


def _vector(x: Any, what: str) -> BlockCyclicArray:
    x = _require(x, what)
    if x.ndim != 1:
        raise ValueError(
            f"{what}: only vectors (1-D) are sorted; a distributed matrix of shape {x.shape} is "
            "not (gather it with to_numpy() if it fits, or sort a row or column: A[i], A[:, j])"
        )
    return x


def _values(x: BlockCyclicArray) -> Any:
    """The whole vector on every rank."""
    return x.to_numpy()


def _like(v: np.ndarray, x: BlockCyclicArray) -> BlockCyclicArray:
    """The host vector ``v`` (the same on every rank) in ``x``'s blocks on ``x``'s grid."""
    return from_host(v, x.block[0], x.grid)


def _axis(axis: Any, what: str) -> None:
    if axis not in (-1, 0, None):
        raise np.exceptions.AxisError(axis, 1, what)


def _by_numpy(fn: Any, doc: str) -> Any:
    """``np.sort`` / ``np.argsort`` of a vector: NumPy's ``fn`` of the gathered vector, in
    ``a``'s blocks."""
    what = f"np.{fn.__name__}"

    def impl(
        a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None
    ) -> BlockCyclicArray:
        x = _vector(a, what)
        _axis(axis, what)
        return _like(fn(_values(x), kind=kind, order=order, stable=stable), x)

    impl.__name__ = impl.__qualname__ = f"_{fn.__name__}"
    impl.__doc__ = doc
    return implements(fn)(impl)


_sort = _by_numpy(np.sort, "``np.sort`` of a vector: a new sorted vector in ``a``'s blocks.")
_argsort = _by_numpy(
    np.argsort, "``np.argsort`` of a vector: the intp vector of the sorting permutation."
)


@implements(np.unique)
def _unique(
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: Any = None,
    *,
    equal_nan: bool = True,
    **kwargs: Any,
) -> Any:
    """``np.unique`` of a vector: the sorted unique values as a vector, with NumPy's optional
    index, inverse and count vectors (each a distributed vector)."""
    x = _vector(ar, "np.unique")
    if axis not in (None, 0, -1):
        raise np.exceptions.AxisError(axis, 1, "np.unique")
    unique: Any = np.unique  # its overloads spell out each combination of the flags
    out = unique(
        _values(x),
        return_index=return_index,
        return_inverse=return_inverse,
        return_counts=return_counts,
        equal_nan=equal_nan,
        **kwargs,
    )
    if isinstance(out, tuple):
        return tuple(_like(np.asarray(v).reshape(-1), x) for v in out)
    return _like(out, x)


def _order_statistic(fn: Any) -> Any:
    """``np.median`` / ``np.percentile`` / ``np.quantile`` of a vector: NumPy's ``fn`` of the
    gathered vector, the same NumPy scalar (or, for several ``q``, host array) on every rank."""
    what = f"np.{fn.__name__}"

    def impl(a: Any, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        _no_extras(what, out)
        x = _vector(a, what)
        _axis(kwargs.pop("axis", None), what)
        return fn(_values(x), *args, **kwargs)

    impl.__name__ = impl.__qualname__ = f"_{fn.__name__}"
    impl.__doc__ = f"``{what}`` of a vector (gathered, ``O(n)``); matrices refused."
    return implements(fn)(impl)


_median = _order_statistic(np.median)
_percentile = _order_statistic(np.percentile)
_quantile = _order_statistic(np.quantile)
