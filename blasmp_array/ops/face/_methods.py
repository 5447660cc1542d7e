"""What the ops layer registers in :mod:`blasmp_array._dispatch` for the array.

The array sits below the operators and never imports them (the import-layer check enforces it);
its methods that need an operator look the implementation up in the registry instead. This
module fills the registry for the ops layer, in one place:

* the array methods ``A.T.resolve()`` (``transpose``), ``A.redistribute`` (``redistribute``),
  ``A[key]`` (``getitem``), ``A[key] = value`` (``setitem``) and the copy of a window view
  (``materialize_window``, behind ``A.storage``);
* ``np.matmul``, so ``A @ B`` (NumPy's ufunc protocol) reaches :func:`ops.blas3.matmul.matmul`;
* the NumPy functions and ufuncs of :mod:`.elementwise`, :mod:`.reductions`,
  :mod:`.functions`, :mod:`.products`, :mod:`.array_api` (NumPy 2's array-API names),
  :mod:`.selection`, :mod:`.scans`, :mod:`.sorting`, :mod:`.statistics`, :mod:`.cholesky`,
  :mod:`.lu` and :mod:`.qr`, which register themselves when imported here, and :mod:`.solves`,
  which wraps the solvers' registrations with NumPy's operands (vectors, replicated ndarrays,
  integers);
* the device route of the NumPy door, ``gather_rows`` and ``scatter_rows`` (:mod:`.row_panels`).

``blasmp_array/__init__.py`` imports this module, so ``import blasmp_array`` fills the registry.
To give the array a new operator-backed method, see CONTRIBUTING.md ("Adding an array method").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dispatch import implements_method, implements_ufunc
from ...array import BlockCyclicArray
from ..blas3.matmul import matmul
from ..engine import elementwise, row_panels, selection  # noqa: F401  (they register)
from ..engine.elementwise import assign
from ..engine.indexing import getitem, materialize_window, setitem
from ..engine.redistribute import redistribute, transpose
from ..lapack import cholesky, eig, eigh, lu, qr, solves  # noqa: F401  (they register)
from . import array_api, functions, products, reductions, scans, sorting, statistics  # noqa: F401
from .products import replicated_operands

__all__: list[str] = []

implements_method("transpose")(transpose)
implements_method("redistribute")(redistribute)
implements_method("getitem")(getitem)
implements_method("setitem")(setitem)
implements_method("materialize_window")(materialize_window)
implements_method("matmul")(matmul)  # A @ B of two BlockCyclicArrays, without np.matmul's detour


@implements_ufunc(np.matmul)
def _matmul_ufunc(ufunc: np.ufunc, a: Any, b: Any, out: Any = None, **kwargs: Any) -> Any:
    """``np.matmul(a, b, out=...)`` and ``a @ b``: :func:`matmul`, then the copy into ``out``.

    An ndarray beside a BlockCyclicArray is taken to be the same on every rank (checked, see
    :mod:`._replicated`) and laid out to match its partner."""
    if kwargs:
        raise TypeError(
            f"np.matmul on BlockCyclicArrays does not support the keywords {sorted(kwargs)}"
        )
    if type(a) is not BlockCyclicArray or type(b) is not BlockCyclicArray:
        a, b = replicated_operands(a, b, "np.matmul")
    result = matmul(a, b)
    if out is None:
        return result
    (target,) = out
    if not isinstance(result, BlockCyclicArray):
        raise TypeError("np.matmul: out= of a scalar product (x @ y) is not supported")
    assign(target, result)
    return target
