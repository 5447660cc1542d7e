"""Distributed SYR2K/HER2K (PBLAS ``pxsyr2k``/``pxher2k``) on the triangle pipeline of
``syrk.py``: four panels per step (``op(A)`` and ``op(B)`` along process rows and down process
columns) and two products per block.

Communication protocol: SYRK's (the SUMMA plan of ``panels.py`` on the exchange engine of
``_exchange.py``; see ``syrk.py``): the signals and slots are the same, only the panel pieces
differ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ..engine import _checks as ck
from .syrk import rank_k

__all__ = ["syr2k"]


def syr2k(
    A: BlockCyclicArray,
    B: BlockCyclicArray,
    C: BlockCyclicArray | None = None,
    trans: str = "N",
    lower: bool = True,
    alpha: Any = 1,
    beta: Any = 0,
    num_stages: int = 2,
    *,
    method: str = "auto",
    step_width: int | None = None,
) -> BlockCyclicArray:
    """Symmetric rank-2k update on one triangle of ``C`` (PBLAS ``pxsyr2k``):
    ``C := alpha op(A) op(B)^T + alpha op(B) op(A)^T + beta C``; with ``trans='C'`` and a
    complex dtype, HER2K: ``C := alpha A^H B + conj(alpha) B^H A + beta C``.

    Parameters
    ----------
    A, B : BlockCyclicArray
        ``op(A)`` and ``op(B)`` are ``n x k`` (``trans`` 'N': ``A``; 'T': ``A^T``; 'C': ``A^H``).
    C : BlockCyclicArray, optional
        ``n x n``; only the ``lower`` (or upper) triangle is read and written.
    trans : {'N', 'T', 'C'}
    lower : bool
    alpha, beta : scalar
        Cast to the result dtype; ``beta`` real for HER2K. ``beta == 0`` overwrites.
    num_stages : int
    method : {'auto', 'summa', 'local'}
    step_width : int, optional

    Returns
    -------
    BlockCyclicArray

    Notes
    -----
    ``2 n^2 k`` flops. HER2K sets the imaginary part of the diagonal to zero. ``B`` is
    redistributed (with a warning) when its blocks differ from ``A``'s.
    """
    name = "her2k" if trans in ("C", "c") else "syr2k"
    ck.check_array(A, "A", name)
    ck.check_array(B, "B", name)
    C = ck.check_output(C, name)
    t = ck.check_trans(trans, "trans", name)
    uplo = ck.check_uplo(lower, name)
    herm = t == "C"
    kinds = {np.dtype(x.dtype).kind for x in (A, B, C) if x is not None}
    if herm and "c" not in kinds:
        t, herm = "T", False
    return rank_k(name, A, B, C, t, uplo, alpha, beta, herm, num_stages, method, step_width)
