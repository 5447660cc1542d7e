"""Stage 1 of the SVD: reduction of a square matrix to upper band form on the process grid
(LAPACK's ``xge2gb``, SLATE's ``ge2tb``), by the distributed blocked Householder QR of
:mod:`ops.lapack._householder`.

``A = Q_L B Q_R^H`` with ``B`` upper banded of bandwidth ``b`` (the block size: ``B[i, j] = 0``
unless ``i <= j <= i + b``). Step ``k`` (``k0 = k b``, ``e = min(b, n - k0)`` columns):

1. *Column panel*: the Householder QR of ``A[k0:, k0:k0+e]`` (:func:`hh.factor` on a copy in a
   layout of its own: square blocks ``b``, source process ``(0, 0)``); ``A[k0:, k0:k0+e] := R``
   (zeros below the diagonal) and ``A[k0:, k0+e:] := Q_k^H A[k0:, k0+e:]`` (:func:`hh.apply_q`
   on a copy, written back).
2. *Row panel*: the Householder QR of ``A[k0:k0+e, k0+e:]^H`` (an LQ factorisation of the row
   panel, ``= L P_k^H``): ``A[k0:k0+e, k0+e:] := [L 0]`` and ``A[k0+e:, k0+e:] :=
   A[k0+e:, k0+e:] P_k``, applied as ``(P_k^H A[k0+e:, k0+e:]^H)^H`` on a transposed copy.

Every reflector is kept (``left[k] = (k0, Q_k)``, ``right[k] = (k0 + e, P_k)``), so that
``Q_L = Q_0 Q_1 ...`` and ``Q_R = P_0 P_1 ...`` can be applied afterwards (:func:`apply_left`,
:func:`apply_right`: the back-transform of the singular vectors, ``U = Q_L U_B``,
``V = Q_R V_B``, as the distributed ``pxormqr`` of :mod:`ops.lapack._householder`, all GEMMs).

Communication: that of the QR pipelines (panel gathers, column sums, ``V`` along the grid
rows; see :mod:`ops.lapack._householder`) and, per step, the copies of the windows into and out of
the panel layouts (:func:`ops.engine.redistribute.redistribute` and ``__setitem__``: exchanges of
the one engine, the transposed ones through its distributed transpose). Nothing depends on the
data, so every rank makes the same exchanges. ``2 b`` reflectors per ``b`` columns: ``8 n^3 /
3`` flops as the one-stage bidiagonal reduction's, but all of them in GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ...layout import BlockCyclicLayout
from ..engine.redistribute import redistribute
from . import _householder as hh

__all__ = ["BandReduction", "reduce_to_band", "apply_left", "apply_right", "panel_copy"]


@dataclass
class BandReduction:
    """``A = Q_L B Q_R^H``: the band ``B`` (an ``n x n`` array, zeros outside the upper band of
    width ``b``) and the factored panels of ``Q_L`` and ``Q_R`` with their first rows."""

    band: BlockCyclicArray
    b: int
    left: list[tuple[int, hh.Factorization]] = field(default_factory=list)
    right: list[tuple[int, hh.Factorization]] = field(default_factory=list)


def panel_copy(x: BlockCyclicArray, b: int) -> BlockCyclicArray:
    """A stored copy of ``x`` (any view: window, transposed, conjugated) with square blocks
    ``b`` and source process ``(0, 0)``: the layout :func:`hh.factor` and :func:`hh.apply_q`
    work in. Collective."""
    lay = BlockCyclicLayout(x.shape, (b, b), x.grid.shape)
    if x.is_view or x.layout != lay:
        return redistribute(x, block=(b, b))
    return x.copy()


def reduce_to_band(a: BlockCyclicArray) -> BandReduction:
    """Reduce the square ``a`` (not written) to upper band form of bandwidth ``a.block[0]``
    (module docstring). Collective."""
    n = a.shape[0]
    b = int(a.block[0])
    w = panel_copy(a, b)
    out = BandReduction(w, b)
    for k0 in range(0, n, b):
        e = min(b, n - k0)
        # column panel: A[k0:, k0:k0+e] = Q_k R
        f = hh.factor(panel_copy(w[k0:, k0 : k0 + e], b), overwrite=True)
        out.left.append((k0, f))
        w[k0:, k0 : k0 + e] = hh.r_factor(f, n - k0)
        if k0 + e >= n:
            break
        # A[k0:, k0+e:] := Q_k^H A[k0:, k0+e:]
        c = panel_copy(w[k0:, k0 + e :], b)
        hh.apply_q(f, c, "C")
        w[k0:, k0 + e :] = c
        # row panel: A[k0:k0+e, k0+e:] = L P_k^H (the QR of its conjugate transpose)
        g = hh.factor(panel_copy(w[k0 : k0 + e, k0 + e :].H, b), overwrite=True)
        out.right.append((k0 + e, g))
        w[k0 : k0 + e, k0 + e :] = hh.r_factor(g, n - k0 - e).H
        # A[k0+e:, k0+e:] := A[k0+e:, k0+e:] P_k = (P_k^H A[k0+e:, k0+e:]^H)^H
        d = panel_copy(w[k0 + e :, k0 + e :].H, b)
        hh.apply_q(g, d, "C")
        w[k0 + e :, k0 + e :] = d.H
    return out


def _apply(factors: list[tuple[int, hh.Factorization]], x: BlockCyclicArray, b: int) -> None:
    """``x := F_0 F_1 ... x`` for the factored panels ``F_k`` acting on ``x``'s rows from
    their first row on (the last one first). Collective."""
    for r0, f in reversed(factors):
        if r0 == 0 and x.layout == BlockCyclicLayout(x.shape, (b, b), x.grid.shape):
            hh.apply_q(f, x, "N")
            continue
        c = panel_copy(x[r0:, :], b)
        hh.apply_q(f, c, "N")
        x[r0:, :] = c


def apply_left(red: BandReduction, u: BlockCyclicArray) -> None:
    """``u := Q_L u`` in place (``u`` stored, ``n`` rows). Collective."""
    _apply(red.left, u, red.b)


def apply_right(red: BandReduction, v: BlockCyclicArray) -> None:
    """``v := Q_R v`` in place (``v`` stored, ``n`` rows). Collective."""
    _apply(red.right, v, red.b)


def band_host(x: Any, b: int) -> Any:
    """The upper band of width ``b`` of the host matrix ``x`` as LAPACK's band storage of the
    perfect-shuffled Jordan-Wielandt matrix ``[[0, B], [B^H, 0]]`` (``2n x 2n``, Hermitian,
    ``2b + 1`` superdiagonals): ``B[i, i + d]`` sits at row ``2i``, column ``2(i + d) + 1``;
    its eigenvalues are ``+-`` the singular values of ``B``."""
    n = x.shape[0]
    u = 2 * b + 1
    ab = np.zeros((u + 1, 2 * n), dtype=x.dtype)
    for d in range(min(b, n - 1) + 1):
        diag = np.diagonal(x, d)
        ab[u - 2 * d - 1, 2 * d + 1 :: 2] = diag
    return ab
