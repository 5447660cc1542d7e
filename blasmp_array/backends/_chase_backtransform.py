"""The bulge chase's back-transformation as block reflectors: ``Z := Q2 Z``, where the chase
(``_gpu_band_eig``) reduced the band ``B`` to the tridiagonal ``T = Q2^T B Q2`` and ``Z`` holds
eigenvectors of ``T`` (so ``Q2 Z`` holds those of ``B``). On the GPU the application is two
strided-batched GEMMs per step (``_gpu_band_eigh.apply_device``); the host form
(:func:`apply_host`) runs the same schedule one block at a time, for the tests. This module
imports no CUDA library: its arrays come from the ``xp`` it is given.

The algebra (Haidar, Ltaief, Luszczek and Dongarra, IPDPS 2012, "A comprehensive study of task
coalescing for selecting parallelism granularity in a two-stage bidiagonal reduction"; MAGMA's
``dsbtrd`` back-transformation). ``H(s, k)`` is the reflector of task ``k`` of sweep ``s``,
acting on rows ``s + 1 + k b ..`` (``b`` of them); ``Q2`` is their product in the chase's
sequential order (sweeps ascending, tasks ascending). The tasks of one sweep touch disjoint
rows, so they commute. A *group* ``G`` is ``b`` consecutive sweeps ``s = G b + j``; its
reflectors of task ``k`` form the block reflector ``P(G, k) = H(Gb, k) H(Gb + 1, k) ...
H(Gb + b - 1, k) = I - W T W^T``: ``W`` is ``(2b - 1) x b``, column ``j`` holding
``H(Gb + j, k)``'s vector from its row ``j`` (LAPACK's forward compact WY, ``T`` upper
triangular from ``T^{-1} = diag(1 / tau) + triu(W^T W, 1)``), acting on rows
``r(G, k) = (G + k) b + 1 ..``. Reordering the product by tasks needs only the pairs
``H(s, k), H(s', k')`` with ``s < s'``, ``k < k'`` to commute, and their rows are disjoint;
so ``Q2 = prod_G prod_{k descending} P(G, k)`` and ``Q2 Z`` applies the groups from the last
to the first, each ``k`` ascending.

Block ``(G, k)`` and ``(G', k')`` overlap only when ``|(G + k) - (G' + k')| <= 1``. Step
``t`` applies every block with ``k + (G_last - G) = t``: consecutive ``G`` of one step have
``G + k`` two apart, so their row ranges (``2b - 1`` rows each, starting ``2b`` apart) are
disjoint, and every block that must precede one of them ran in an earlier step. About
``(n / b)^2 / 2`` blocks in ``2 n / b`` steps; each block costs ``4 (2b - 1) b k`` flops on
``k`` eigenvectors (half of them on zeros of ``W``): about ``2 n^3`` for ``k = n``.

Storage: ``Z`` column-major with leading dimension ``ldz >= n + 2 b`` (the C-ordered
``(k, ldz)`` array ``zc`` holds ``Z^T``; rows ``n ..`` zero), so a block's rows are a submatrix
and the blocks of a step lie a constant ``2b`` apart; ``W`` and ``W T`` as C-ordered
``(groups, K_0, b, 2b - 1)`` arrays (``W^T`` and ``(W T)^T``, i.e. column-major ``W``), whose
blocks of a step lie a constant ``K_0 + 1`` blocks apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._gpu_band_eig import stage_tasks

__all__ = ["BlockReflectors", "block_reflectors", "schedule", "apply_host"]

#: groups whose ``T`` factors are formed at once (bounds the temporaries)
_GROUP_CHUNK = 16


class BlockReflectors:
    """The chase's reflectors as block reflectors: ``wt[G, k]`` (``W^T``, ``b x (2b - 1)``),
    ``wtt[G, k]`` (``(W T)^T``) and the step schedule of :func:`schedule`."""

    def __init__(self, wt: Any, wtt: Any, steps: list[tuple[int, int, int]], b: int) -> None:
        self.wt, self.wtt, self.steps, self.b = wt, wtt, steps, b

    @property
    def kmax(self) -> int:
        return int(self.wt.shape[1])


def schedule(n: int, b: int, groups: int, kmax: int) -> list[tuple[int, int, int]]:
    """The steps ``(G_lo, k_lo, count)`` (module docstring): blocks ``(G_lo + i, k_lo + i)``,
    ``i < count``, of which only those where some sweep of the group has task ``k``."""
    last = groups - 1
    tasks = [int(stage_tasks(n, b, g * b)) for g in range(groups)]  # K of each group's 1st sweep
    steps = []
    for t in range(last + kmax):
        g_lo = max(0, last - t)
        g = g_lo
        while g <= last and t - last + g < min(tasks[g], kmax):
            g += 1
        if g > g_lo:
            steps.append((g_lo, t - last + g_lo, g - g_lo))
    return steps


def block_reflectors(xp: Any, v: Any, tau: Any, n: int) -> BlockReflectors:
    """The block reflectors of the chase's reflectors ``v`` (``(sweeps, K_0, b)``, first entries
    1) and ``tau`` (``(sweeps, K_0)``) of a band of order ``n``, in ``xp``'s arrays. A reflector
    with ``tau = 0`` (the identity) gets a zero vector and ``tau = 1``, so that ``T^{-1}``'s
    formula holds."""
    sweeps, kmax, b = (int(x) for x in v.shape)
    dt = v.dtype
    groups = -(-sweeps // b)
    rows = 2 * b - 1
    tp = xp.zeros((groups * b, kmax), dt)
    tp[:sweeps] = tau
    nz = tp != 0
    vg = xp.zeros((groups * b, kmax, b), dt)
    vg[:sweeps] = v
    vg *= nz[..., None]
    tp = xp.where(nz, tp, 1)
    wt = xp.zeros((groups, kmax, b, rows), dt)
    # wt[G, k, j, j + i] = v[G b + j, k, i]: a view of wt with strides (.., rows + 1, 1)
    item = dt.itemsize
    diag = xp.lib.stride_tricks.as_strided(
        wt,
        shape=(groups, kmax, b, b),
        strides=(kmax * b * rows * item, b * rows * item, (rows + 1) * item, item),
    )
    diag[...] = vg.reshape(groups, b, kmax, b).transpose(0, 2, 1, 3)
    wtt = xp.empty_like(wt)
    inv_tau = (1 / tp).reshape(groups, b, kmax).transpose(0, 2, 1)  # (groups, kmax, b)
    upper = xp.triu(xp.ones((b, b), dt), 1)
    eye = xp.eye(b, dtype=dt)
    for g0 in range(0, groups, _GROUP_CHUNK):
        sl = slice(g0, min(g0 + _GROUP_CHUNK, groups))
        w = wt[sl]
        s = xp.matmul(w, w.transpose(0, 1, 3, 2)) * upper  # triu(W^T W, 1)
        s += inv_tau[sl][..., None] * eye
        t = xp.linalg.inv(s)  # upper triangular: LU's pivots are its diagonal, no swaps
        wtt[sl] = xp.matmul(t.transpose(0, 1, 3, 2), w)  # (W T)^T = T^T W^T
    return BlockReflectors(wt, wtt, schedule(n, b, groups, kmax), b)


def apply_host(br: BlockReflectors, zc: np.ndarray) -> None:
    """``Z := Q2 Z`` for ``zc`` (C-ordered ``(k, ldz)``, ``Z^T``, ``ldz >= n + 2b``), block by
    block in the schedule's order (the tests' reference for the GPU's batched form)."""
    b = br.b
    rows = 2 * b - 1
    for g_lo, k_lo, count in br.steps:
        for i in range(count):
            g, k = g_lo + i, k_lo + i
            r = (g + k) * b + 1
            blk = zc[:, r : r + rows]
            blk -= (blk @ br.wt[g, k].T) @ br.wtt[g, k]
