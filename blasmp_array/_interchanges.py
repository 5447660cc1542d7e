"""LAPACK's row interchanges (``ipiv``) as index maps, on the host: what the LU operators
(``ops/lapack/lu.py``, ``ops/lapack/_lu_local.py``) build their row exchanges from."""

from __future__ import annotations

import numpy as np

__all__ = ["row_map"]


def row_map(piv: np.ndarray, k0: int, n: int) -> np.ndarray:
    """The interchanges ``piv`` (0-based global rows) applied in order to rows ``k0 ..``: the
    new row ``j`` is the old row ``src[j]`` (identity outside ``[k0, n)``)."""
    src = np.arange(n)
    piv = np.asarray(piv, dtype=np.int64)
    if piv.size == 0:
        return src
    # sequential by nature: LAPACK's own xlaswp applied to the row numbers (exact in float64);
    # a Python loop over the swaps took 0.3-0.6 ms per 2048 pivots, on the critical path of
    # every LU step (a loop over NumPy scalars 1.4 ms)
    from scipy.linalg.lapack import dlaswp  # (here: `import blasmp_array` stays light)

    rows = np.arange(k0, n, dtype=np.float64)[:, None]
    rows = dlaswp(rows, (piv - k0).astype(np.int32), overwrite_a=1)
    src[k0:] = rows[:, 0].astype(np.int64)
    return src
