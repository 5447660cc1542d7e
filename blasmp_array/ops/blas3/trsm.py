"""Distributed triangular solve with many right-hand sides (PBLAS ``pxtrsm``) and SciPy's
``solve_triangular``.

``trsm`` solves ``op(A) X = alpha B`` (side 'left') or ``X op(A) = alpha B`` (side 'right') for
``X``, where ``A`` is ``n x n`` triangular and only its named triangle is read (not its diagonal
when ``unit_diagonal``). Cost: ``m^2 n`` flops for a left solve with ``B`` of shape ``m x n``,
``m n^2`` for a right solve (times 4 real flops per complex multiply-add, i.e. ``4 m^2 n``).

Layering: :func:`solve_triangular` / :func:`trsm` (checks, view folding, blocking) ->
:class:`_TrsmPipeline` (one driver for all 16 side/uplo/trans/diag variants) -> one step on
local tiles (``backend.trsm`` on the diagonal block, ``backend.gemm`` for the trailing update)
-> two plans over the one-sided exchange engine (:class:`ops.engine._exchange.Exchange`: slots,
ready/ack signals, the pooled workspace).

Algorithm (blocked, right-looking, look-ahead 1)
------------------------------------------------
Let the *solve axis* be the axis of ``B`` that ``A`` acts on (rows for side 'left', columns for
'right'), cut into ``K`` blocks of ``nb`` (``A.block == (nb, nb)`` and ``B``'s block along the
solve axis is ``nb``). ``op(A)`` is lower or upper triangular; the blocks are visited forward
(``k = 0 .. K-1``) when the solve runs from the first block (left and ``op(A)`` lower, or right
and ``op(A)`` upper) and backward otherwise. With ``B_i`` the i-th block row (left) or block
column (right) of the working copy ``X`` (scaled by ``alpha`` first), step ``k`` is::

    X_k = op(A)_kk^{-1} B_k              (left)   /  B_k op(A)_kk^{-1}  (right)
    B_i -= op(A)_ik X_k   for i after k   (left)   /  B_i -= X_k op(A)_ki (right)

Data movement of step ``t`` (``k = order[t]``); names follow "where it lives":

* ``a_panel``: the blocks of ``op(A)`` that step ``k`` needs (the diagonal block and the
  off-diagonal blocks coupling ``k`` with the blocks after it). Each is sent *as stored*, i.e.
  the stored block ``A[i, k]`` or ``A[k, i]``, from its owner to every process of the grid
  row (left) or grid column (right) holding ``B_i``. ``# A[:, k] -> grid row of B_i``. Each
  sender packs ALL its pieces for one group (grid row/column) into one message, put to every
  receiver of the group; messages land in sender-rank order and, when that is not the local
  order (interleaved owners, e.g. transposed pieces on a 2-D grid), the receiver unpacks them
  into a per-stage stack buffer. The stack follows the receiver's local order, so its whole
  trailing update is ONE gemm. Pieces whose stored orientation is transposed with respect to
  the stack (left with trans 'T'/'C', right with 'N') are packed transposed and read back
  through a ``.T`` view; the local kernels apply ``trans`` themselves (no conjugation is ever
  materialised, and the unreferenced triangle is never read: ``backend.trsm`` reads only the
  ``uplo`` triangle of the diagonal block and the off-diagonal pieces lie inside it).
* ``x_row``: ``X_k`` (the solved block row/column) goes from its owners (the grid row/column
  holding ``B_k``) to the other processes of their grid column (left) / grid row (right) that
  still hold blocks after ``k``. ``# X[k, :] -> grid column``.

Look-ahead (``num_stages >= 2``): at step ``t`` the owner of the *next* block first applies
step ``t``'s update to that block alone, solves it and records an event; the communication
stream then sends ``X_{t+1}`` and the panel of step ``t+2`` while the compute stream finishes the
rest of step ``t``'s trailing update. With ``num_stages == 1`` there is no look-ahead (a slot can
only be refilled after its receivers finished the whole step).

Stream order per process (``E_t``: event after the solve of ``X_t``)::

    comm:    panel(0), [wait E_0] x_row(0), panel(1), [wait E_1] x_row(1), panel(2), ...
    compute: solve(0), E_0, step(0): wait x_row(0), panel(0); update next block; solve(1),
             E_1; update the rest; ack(0) | step(1) ...

Signal protocol (two exchanges of :mod:`ops.engine._exchange`, alive at once)
-----------------------------------------------------------------------------
``a_panel`` and ``x_row`` are two :class:`~blasmp_array.ops.engine._exchange.Plan` s run by two
:class:`~blasmp_array.ops.engine._exchange.Exchange` s on their own pooled channels
(``"trsm.panel"``, ``"trsm.x"``), each with ``num_stages`` slots (step ``t`` uses slot ``s = t mod
num_stages``) and the engine's one signal discipline (see ``ops/engine/_exchange.py``); every
message is *in-slot*: the receiver reads the panel (or ``X_k``) straight from its slot, no copy.

* ``ready[s, p]`` (on a receiver, per sender ``p``): ``p`` adds 1 with the ``put_signal`` of
  each message of step ``t``; the receiver waits on its compute stream -- for ``a_panel`` in
  the solve or the update of step ``t``, whichever comes first (once per step), for ``x_row``
  before the update -- until the word reaches the cumulative count of ``p``'s messages into
  slot ``s``, derived from the plan (every rank builds the same plan from the layouts).
  A sender that is itself a receiver of its group packs into its own slot; its own streams are
  ordered by events instead of signals (see ``ops/engine/_exchange.py``).
* ``ack[s, q]`` (on a sender, per receiver ``q``): ``q`` adds 1 on its compute stream once it
  has finished step ``t`` (``release(t)``: after the update of step ``t``, or, with
  ``num_stages == 1``, before the solve of step ``t + 1``, which needs the same slot), to
  every process that sends it a message at step ``t + num_stages``; the sender waits on its
  comm stream before it puts step ``t + num_stages`` into ``q``. An ACK is needed because
  slots are reused; the first ``num_stages`` steps need none.

Who triggers a send: ``a_panel(t)`` is prefetched (sent two steps ahead, its source ``A`` is
not written; with ``num_stages == 1`` right after ``release(t - 1)``: the host calls
``release(t - S)`` before ``send(t)``, as the engine requires for a sender's own slot);
``x_row(t)`` is sent with ``send(t, after=E_t)``: the comm stream waits for the
solve of ``X_t``. Staging slots rotate with the steps; the engine's ``quiet`` before a stage is
repacked completes the puts that read it. The pools are reused by the next call; one
:func:`ops.engine._exchange.finish` of both exchanges ends the operator (one synchronisation, one
host ``allgather`` of the outcome that separates operators; a timeout raises on every rank).

Deadlock freedom: order messages ``a_panel(t) < x_row(t) < a_panel(t+1)``. Every wait of
``a_panel(t)`` is on acks of step ``t - num_stages``, whose completion needs only
``a_panel(<= t - num_stages + 1)`` and ``x_row(t - num_stages)``; every wait of ``x_row(t)``
is on the solve of ``X_t`` (needing ``a_panel(t)``, ``x_row(t-1)``) and acks of step
``t - num_stages``. With look-ahead, step ``t``'s completion also needs ``a_panel(t+1)``, which
is why look-ahead requires ``num_stages >= 2``. Each comm stream issues its messages in this
order, so every wait depends only on earlier messages.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from numbers import Integral, Number
from typing import Any

import numpy as np

from ..._alloc import new_array
from ..._warnings import RedistributionWarning
from ...array import SUPPORTED_DTYPES, BlockCyclicArray
from ...backends.base import Backend
from ...layout import numroc
from ..engine import _checks as ck
from ..engine import _exchange as engine
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ..engine.panels import Gather, Source, pack_pieces, put_indexed, window_gathers

__all__ = ["trsm", "solve_triangular", "TrsmRedistributionWarning", "free_workspace"]

_SIDES = {"left": "L", "l": "L", "right": "R", "r": "R"}
_TRANS = {"n": "N", "t": "T", "c": "C"}
_SCIPY_TRANS = {0: "N", 1: "T", 2: "C"}


class TrsmRedistributionWarning(RedistributionWarning):
    """An operand of ``trsm`` was redistributed to a conforming blocking (costs a copy)."""


# -- public API -------------------------------------------------------------------------------
def trsm(
    A: BlockCyclicArray,
    B: BlockCyclicArray,
    side: str = "left",
    lower: bool = True,
    trans: str = "N",
    unit_diagonal: bool = False,
    alpha: Any = 1,
    overwrite_b: bool = False,
    num_stages: int = 2,
) -> BlockCyclicArray:
    """Solve a triangular system with many right-hand sides (PBLAS ``pxtrsm``). Collective.

    Solves ``op(A) X = alpha B`` (``side='left'``) or ``X op(A) = alpha B`` (``side='right'``),
    where ``op(A)`` is ``A``, ``A.T`` or ``A.conj().T``.

    Parameters
    ----------
    A : BlockCyclicArray
        Square ``n x n`` triangular matrix. Only the triangle named by ``lower`` is read, and
        not its diagonal when ``unit_diagonal``. Lazy views (``T.T``, ``T.H``) are folded into
        ``trans``/``lower`` without moving data (``lower`` names the triangle of the view).
        ``A.block`` must be square; otherwise ``A`` is redistributed (with a warning).
    B : BlockCyclicArray
        ``n x nrhs`` (left) or ``m x n`` (right), on the same grid as ``A``. Its block along
        the solve axis must equal ``A``'s; otherwise ``B`` is redistributed (with a warning)
        and the solution redistributed back to ``B``'s layout.
    side : {'left', 'right'}
    lower : bool
        ``A`` is lower (True) or upper (False) triangular.
    trans : {'N', 'T', 'C'}
        ``op(A) = A``, ``A^T`` or ``A^H``.
    unit_diagonal : bool
        Assume ``A``'s diagonal is all ones (it is not read).
    alpha : scalar
        Scale of ``B``. ``alpha == 0`` gives ``X = 0`` without reading ``A``.
    overwrite_b : bool
        Write the solution into ``B``'s local storage and return ``B`` (when ``B`` is not a view).
    num_stages : int
        Pipeline depth (buffers in flight per exchange); ``>= 2`` enables look-ahead.

    Returns
    -------
    X : BlockCyclicArray
        The solution, with ``B``'s shape, layout and grid.

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank, before solving, if a non-unit ``A`` has an exact zero on its diagonal
        (the message names the first such index).
    ValueError, TypeError
        On every rank, before any communication, for invalid arguments.

    Notes
    -----
    ``m^2 n`` flops for side 'left' (``B`` is ``m x n``), ``m n^2`` for side 'right'. The
    algorithm and its signal protocol are described in the module docstring.
    """
    if not isinstance(A, BlockCyclicArray) or not isinstance(B, BlockCyclicArray):
        raise TypeError(
            "trsm expects BlockCyclicArray operands, got "
            f"{type(A).__name__} and {type(B).__name__}; build them with blasmp_array.from_numpy"
        )
    side_c = _check_choice("side", side, _SIDES, "'left' or 'right'")
    trans_c = _check_choice("trans", trans, _TRANS, "'N', 'T' or 'C'")
    for name, flag in (
        ("lower", lower),
        ("unit_diagonal", unit_diagonal),
        ("overwrite_b", overwrite_b),
    ):
        ck.check_flag(flag, name)
    if not isinstance(num_stages, Integral) or isinstance(num_stages, bool) or num_stages < 1:
        raise ValueError(f"num_stages must be an integer >= 1, got {num_stages!r}")
    return _trsm(
        A,
        B,
        side_c,
        bool(lower),
        trans_c,
        bool(unit_diagonal),
        alpha,
        bool(overwrite_b),
        int(num_stages),
        check_finite=False,
    )


def solve_triangular(
    a: BlockCyclicArray,
    b: BlockCyclicArray,
    trans: int | str = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> BlockCyclicArray:
    """Solve ``op(a) x = b`` for ``x``, ``a`` triangular (SciPy's ``solve_triangular``). Collective.

    Same signature and defaults as :func:`scipy.linalg.solve_triangular` (``a`` is *upper*
    triangular unless ``lower=True``); runs the distributed :func:`trsm` (side 'left').

    Parameters
    ----------
    a : BlockCyclicArray
        ``n x n`` triangular matrix; only the named triangle is read.
    b : BlockCyclicArray
        ``n x k`` right-hand sides (a 2-D distributed matrix; for one vector use an ``(n, 1)``
        matrix).
    trans : {0, 1, 2, 'N', 'T', 'C'}
        Solve ``a x = b`` (0, 'N'), ``a^T x = b`` (1, 'T') or ``a^H x = b`` (2, 'C').
    lower : bool
        Use the lower triangle of ``a`` (default: upper).
    unit_diagonal : bool
        Assume the diagonal of ``a`` is all ones (it is not read).
    overwrite_b : bool
        Allow the solution to be written into ``b``'s storage.
    check_finite : bool
        Check that ``b`` and the referenced triangle of ``a`` hold only finite numbers (one
        reduction); raises ``ValueError`` otherwise. Unlike SciPy, the unreferenced triangle is
        not checked.

    Returns
    -------
    x : BlockCyclicArray
        Shape of ``b``, same layout.

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``a`` is singular (a zero on the diagonal, when not ``unit_diagonal``), on every
        rank, naming the first zero's index.

    Notes
    -----
    ``n^2 k`` flops (see :func:`trsm`).
    """
    if not isinstance(b, BlockCyclicArray) or not isinstance(a, BlockCyclicArray):
        hint = ""
        if getattr(b, "ndim", None) == 1:
            hint = (
                " a 1-D right-hand side is not supported: pass an (n, 1) matrix, e.g. "
                "bm.from_numpy(b.reshape(-1, 1), block=(a.block[0], 1), grid=a.grid)"
            )
        raise TypeError(
            "solve_triangular expects BlockCyclicArray a and b, got "
            f"{type(a).__name__} and {type(b).__name__};{hint or ' build them with '}"
            f"{'' if hint else 'blasmp_array.from_numpy'}"
        )
    if isinstance(trans, Integral) and not isinstance(trans, bool):
        if trans not in _SCIPY_TRANS:
            raise ValueError(f"trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
        trans_c = _SCIPY_TRANS[int(trans)]
    else:
        trans_c = _check_choice("trans", trans, _TRANS, "0, 1, 2, 'N', 'T' or 'C'")
    for name, flag in (
        ("lower", lower),
        ("unit_diagonal", unit_diagonal),
        ("overwrite_b", overwrite_b),
        ("check_finite", check_finite),
    ):
        ck.check_flag(flag, name)
    return _trsm(
        a,
        b,
        "L",
        bool(lower),
        trans_c,
        bool(unit_diagonal),
        1,
        bool(overwrite_b),
        2,
        check_finite=bool(check_finite),
    )


# -- checks, view folding, blocking ----------------------------------------------------------
def _check_choice(name: str, value: Any, table: dict[str, str], valid: str) -> str:
    key = value.lower() if isinstance(value, str) else None
    if key not in table:
        raise ValueError(f"{name} must be one of {valid}, got {value!r}")
    return table[key]


@dataclass(frozen=True)
class _Spec:
    """The reduced problem on stored data: every rank computes the same one."""

    side: str  # 'L' or 'R'
    uplo: str  # triangle of the *stored* A: 'L' or 'U'
    trans: str  # 'N', 'T' or 'C' applied to the stored A ('C' only for complex dtypes)
    diag: str  # 'N' or 'U'
    alpha: Any
    num_stages: int


def _fold_view(A: BlockCyclicArray, lower: bool, trans: str) -> tuple[BlockCyclicArray, bool, str]:
    """Fold a lazy transposed view of ``A`` into (stored A, stored lower, trans), no data moved
    (a window view stays one: the panel plan gathers its blocks from the parent).

    A conjugated-only view, or a composition that would need ``conj(A)`` (e.g. ``trans='T'`` of
    ``A.H``), is materialised instead (a local conjugation, or a transpose).
    """
    if not A.is_view or (A.is_window and not (A._transposed or A._conjugated)):
        return A, lower, trans  # stored, or a window view the panel plan reads in place
    if A.op in ("T", "C"):
        view = A.op
        stored = A._with_flags(False, False) if A.is_window else A.storage
        if trans == "N":
            return stored, not lower, view
        if trans == view:
            return stored, not lower, "N"
    return A.resolve(), lower, trans


def _trsm(
    A: BlockCyclicArray,
    B: BlockCyclicArray,
    side: str,
    lower: bool,
    trans: str,
    unit: bool,
    alpha: Any,
    overwrite_b: bool,
    num_stages: int,
    check_finite: bool,
) -> BlockCyclicArray:
    ax = 0 if side == "L" else 1
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be square, got shape {A.shape}")
    if B.shape[ax] != A.shape[0]:
        what = "rows" if side == "L" else "columns"
        raise ValueError(
            f"side={'left' if side == 'L' else 'right'}: B must have {A.shape[0]} {what} to "
            f"match the {A.shape[0]}x{A.shape[1]} A, got B of shape {B.shape}"
        )
    if not A.grid.same_as(B.grid) and (
        A.grid.size != B.grid.size or A.grid.backend is not B.grid.backend
    ):
        raise ValueError(
            f"A and B live on grids of different processes or backends ({A.grid} and "
            f"{B.grid}); build both on one communicator and backend"
        )
    dtype = np.result_type(A.dtype, B.dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtypes {A.dtype} and {B.dtype}")
    if not isinstance(alpha, Number):
        raise TypeError(f"alpha must be a number, got {type(alpha).__name__}")
    calpha = complex(alpha)  # type: ignore[call-overload]
    if dtype.kind != "c" and calpha.imag != 0:
        raise TypeError(f"a complex alpha={alpha} cannot scale the real {dtype} B; cast B first")
    alpha = dtype.type(calpha if dtype.kind == "c" else calpha.real)

    if dtype.kind != "c" and trans == "C":
        trans = "T"
    # -- from here on, collective operations only (identical decisions on every rank) --
    A, lower, trans = _fold_view(A, lower, trans)
    if not A.grid.same_as(B.grid):
        n = A.shape[0]
        warnings.warn(
            f"trsm: A is on a {A.grid.nprow}x{A.grid.npcol} grid and B on a "
            f"{B.grid.nprow}x{B.grid.npcol} grid; redistributing A to B's grid (an all-to-all "
            f"moving its {n}x{n} elements). Build A on B's grid to avoid it.",
            TrsmRedistributionWarning,
            stacklevel=3,
        )
        A = A.redistribute(grid=B.grid)
    if dtype.kind != "c" and trans == "C":
        trans = "T"
    if A.dtype != dtype:
        A = A.astype(dtype)
    target = B
    # the working copy X of B: a window view's copy is that copy (no ViewCopyWarning)
    Bw = B.copy() if B.is_window else B.resolve() if B.is_view else B
    if Bw.dtype != dtype:
        Bw = Bw.astype(dtype)
    A, Bw = _conform_blocks(A, Bw, ax)
    spec = _Spec(side, "L" if lower else "U", trans, "U" if unit else "N", alpha, num_stages)

    # NaN/inf (check_finite) and an exact zero on the diagonal: one host round trip
    k = (-1 if spec.uplo == "L" else 1) if spec.diag == "U" else 0  # unit: no diagonal
    zero_diagonal = alpha != 0 and not unit
    ck.check_finite(
        A, Bw, uplo=spec.uplo, k=k, finite=bool(check_finite), zero_diagonal=zero_diagonal
    )
    if alpha == 0:
        X = new_array(Bw.layout, Bw.grid, Bw.dtype, fill=0)
    else:
        # B itself with overwrite_b, or already a copy of our own (a resolved view, a cast)
        X = Bw if overwrite_b or Bw is not B else Bw.copy()
        if X.size and _local_kernel_wins(A):
            _local_trsm(spec, A, X)
        elif X.size:
            _TrsmPipeline(spec, A, X).run()
    if X.layout != target.layout and not target.is_view:
        X = X.redistribute(block=target.block)
    plain_window = target.is_window and not (target._transposed or target._conjugated)
    if overwrite_b and plain_window and X.dtype == target.dtype:
        ck.store(target, X)  # the solution into the parent's window
        return target
    if (
        overwrite_b
        and not target.is_view
        and X is not target
        and X.dtype == target.dtype
        and X.layout == target.layout
    ):
        target._data[...] = X._data
        return target
    return X


def _local_kernel_wins(A: BlockCyclicArray) -> bool:
    """Cost model of the 1x1 grid: one local TRSM call, or the pipeline on local tiles.

    Measured on one H200 (float64, ``n`` right-hand sides, tools/probe_one_process.py at commit
    555f071): one cuBLAS call 17.96 ms at n = 8192 and 107.4 ms at 16384, against 19.05 / 109.0
    for the pipeline on 2048-wide blocks and 18.4 / 107.1 for a recursive solve whose off-diagonal
    work is one large GEMM per level -- the vendor call is as fast as GEMM-rich rewrites and has
    no fixed cost per step, so one call wins at every size (on the CPU too).
    """
    if A.grid.size != 1:
        return False
    limit = _LOCAL_TRSM_MAX_N.get(A.backend.name)
    return limit is None or A.shape[0] <= limit


#: largest n solved by one local kernel on a 1x1 grid, per backend (None: always; the tests
#: set 0 to run the pipeline on the 1x1 grid)
_LOCAL_TRSM_MAX_N: dict[str, int | None] = {"cpu": None, "gpu": None}


def _local_trsm(spec: _Spec, A: BlockCyclicArray, X: BlockCyclicArray) -> None:
    """``X := op(A)^{-1} alpha X`` (or ``X op(A)^{-1}``) with one backend call (1x1 grid)."""
    b = A.backend
    begin_pipeline(b, X.dtype)
    b.trsm(spec.alpha, A._data, X._data, spec.side, spec.uplo, spec.trans, spec.diag, b.compute)
    b.synchronize()


def _conform_blocks(
    A: BlockCyclicArray, B: BlockCyclicArray, ax: int
) -> tuple[BlockCyclicArray, BlockCyclicArray]:
    """Redistribute so that ``A.block == (nb, nb)`` and ``B.block[ax] == nb`` (warns)."""
    mb, nb = A.block
    n = A.shape[0]
    if mb != nb:
        nb = B.block[ax]
        warnings.warn(
            f"trsm: A has non-square blocks {A.block}; redistributing A to blocks ({nb}, {nb}) "
            f"(an all-to-all moving its {n}x{n} elements). Build A with square blocks to avoid it.",
            TrsmRedistributionWarning,
            stacklevel=4,
        )
        A = A.redistribute(block=(nb, nb))
    if B.block[ax] != nb:
        block = (nb, B.block[1]) if ax == 0 else (B.block[0], nb)
        warnings.warn(
            f"trsm: B's blocks {B.block} do not match A's {A.block} along the solve axis; "
            f"redistributing B to {block} and the solution back (two all-to-alls moving "
            f"{B.shape[0]}x{B.shape[1]} elements each). Give B the block size of A to avoid it.",
            TrsmRedistributionWarning,
            stacklevel=4,
        )
        B = B.redistribute(block=block)
    return A, B


def free_workspace(backend: Backend) -> None:
    """Release the pooled TRSM buffers of ``backend`` (collective)."""
    engine.free_workspace(backend, "trsm.")


# -- the driver ----------------------------------------------------------------------------------
class _TrsmPipeline:
    """One blocked right-looking TRSM for every side/uplo/trans/diag (see module docstring)."""

    def __init__(self, spec: _Spec, A: BlockCyclicArray, X: BlockCyclicArray) -> None:
        self.spec = spec
        self.A, self.X = A, X
        self.be = X.backend
        grid = X.grid
        self.grid = grid
        left = spec.side == "L"
        ax = self.ax = 0 if left else 1
        lay = X.layout
        self.n = lay.shape[ax]
        self.nb = lay.block[ax]
        self.K = lay.nblocks[ax]
        self.P = grid.shape[ax]
        self.src = lay.src[ax]
        self.me = grid.coords[ax]
        self.mine_other = grid.coords[1 - ax]
        Po = grid.shape[1 - ax]
        ext_o = [
            numroc(lay.shape[1 - ax], lay.block[1 - ax], q, Po, lay.src[1 - ax]) for q in range(Po)
        ]
        self.ext_o = ext_o
        self.other_ext = ext_o[self.mine_other]
        self.active_other = [q for q in range(Po) if ext_o[q] > 0]
        self.max_other = max(ext_o)
        self.loc_ext = [numroc(self.n, self.nb, p, self.P, self.src) for p in range(self.P)]
        op_lower = (spec.uplo == "L") != (spec.trans != "N")
        forward = op_lower if left else not op_lower
        self.forward = forward
        self.order = list(range(self.K)) if forward else list(range(self.K - 1, -1, -1))
        # stored orientation of the pieces vs the receiver's stack (see module docstring)
        self.transposed = left == (spec.trans != "N")

    # -- index maps along the solve axis --
    def owner(self, i: int) -> int:
        return (i + self.src) % self.P

    def ext(self, i: int) -> int:
        return min(self.nb, self.n - i * self.nb)

    def loc_off(self, i: int) -> int:
        return (i // self.P) * self.nb

    def rank_at(self, p: int, q: int) -> int:
        return self.grid.rank_of(p, q) if self.ax == 0 else self.grid.rank_of(q, p)

    def trailing(self, t: int, p: int) -> tuple[int, int, range]:
        """Local range ``[lo, hi)`` of process ``p``'s blocks after step ``t``, and the blocks."""
        k, P = self.order[t], self.P
        first_owned = (p - self.src) % P
        if self.forward:
            f = k + 1 + (first_owned - (k + 1)) % P
            blocks = range(f, self.K, P)
        else:
            last = k - 1 - (k - 1 - first_owned) % P
            blocks = range(first_owned, last + 1, P) if last >= 0 else range(0)
        if not blocks:
            return 0, 0, blocks
        return self.loc_off(blocks[0]), self.loc_off(blocks[-1]) + self.ext(blocks[-1]), blocks

    def stored(self, i: int, k: int) -> tuple[int, int]:
        return (k, i) if self.transposed else (i, k)

    # -- plans --
    def _panel_plan(self) -> tuple[engine.Plan, list[Any]]:
        """Step ``t``'s panel messages (this rank's :class:`~._exchange.Plan`), and my group's
        stack description per step.

        The panel of group ``p`` (the grid row/column holding ``B_i`` for ``i`` in ``blocks``)
        is the stack of ``op(A)``'s pieces in ``p``'s local order. Each sender sends ALL its
        pieces of the group as one in-slot message (one pack, put to every receiver of the
        group; a sender inside the group packs into its own slot); the messages are
        concatenated in sender-rank order in the slot. When that order is not the local order
        (interleaved senders, e.g. transposed pieces on a 2-D grid) the receiver unpacks the
        slot into a stack buffer. A window view ``A`` (an offset inside a block) is planned
        by :meth:`_window_group`, the stored blocks of any other by :meth:`_block_group`.
        """
        group = self._window_group if self.A.is_window else self._block_group
        me = self.be.rank
        steps: list[tuple[engine.Message, ...]] = []
        mine: list[Any] = []  # per step: (lo, rows, unpack or None) of my group, or None
        stage = 0
        for t, k in enumerate(self.order):
            msgs: list[engine.Message] = []
            staged: dict[int, int] = {}  # sender -> elements it stages at this step
            my_stack = None
            for p in range(self.P):
                _lo, _hi, trail = self.trailing(t, p)
                blocks = sorted([k, *trail]) if self.owner(k) == p else list(trail)
                if not blocks or not self.active_other:
                    continue
                receivers = tuple(self.rank_at(p, q) for q in self.active_other)
                stack = group(k, blocks, receivers, msgs, staged)
                if me in receivers:
                    my_stack = stack
            stage = max(stage, *staged.values(), 0)
            steps.append(tuple(msgs))
            mine.append(my_stack)
        slot = max(self.loc_ext) * self.nb
        plan = engine.Plan("trsm a_panel", me, self.be.size, tuple(steps), slot, stage)
        return plan, mine

    def _block_group(
        self,
        k: int,
        blocks: list[int],
        receivers: tuple[int, ...],
        msgs: list[engine.Message],
        staged: dict[int, int],
    ) -> tuple[int, int, Any]:
        """One group's panel of a stored ``A``: the stored blocks ``A[i, k]`` (or ``A[k, i]``)
        of ``blocks``, one message per sender; returns the group's stack description."""
        Alay, Agrid, me, ek = self.A.layout, self.A.grid, self.be.rank, self.ext(k)
        by_sender: dict[int, list[int]] = {}
        for i in blocks:
            sender = Agrid.rank_of(*Alay.block_owner(*self.stored(i, k)))
            by_sender.setdefault(sender, []).append(i)
        lo = self.loc_off(blocks[0])
        rows = self.loc_off(blocks[-1]) + self.ext(blocks[-1]) - lo
        unpack: list[tuple[int, int, int]] = []  # (slot row, stack row, rows)
        pos = 0
        for sender in sorted(by_sender):
            run = by_sender[sender]
            size = sum(self.ext(i) for i in run) * ek
            pack = functools.partial(self._panel_packer, run, k)
            _add_message(msgs, staged, me, sender, receivers, pos * ek, size, pack)
            for i in run:
                unpack.append((pos, self.loc_off(i) - lo, self.ext(i)))
                pos += self.ext(i)
        in_order = all(a == b for a, b, _ in unpack)
        return lo, rows, None if in_order else unpack

    def _window_group(
        self,
        k: int,
        blocks: list[int],
        receivers: tuple[int, ...],
        msgs: list[engine.Message],
        staged: dict[int, int],
    ) -> tuple[int, int, Any]:
        """One group's panel of a window view ``A``: each sender's part of the stack is one
        :class:`~.panels.Gather` from the parent's local matrix (its rows and columns of the
        window), unpacked by one scatter on the receivers."""
        w = self.A._window
        assert w is not None
        parent, n, me, nb = w.parent, w.rows[1] - w.rows[0], self.be.rank, self.nb
        op = "T" if self.transposed else "N"
        src = Source(parent.layout, op, offset=(w.rows[0], w.cols[0]), extent=(n, n))
        mrows = np.concatenate([np.arange(i * nb, i * nb + self.ext(i)) for i in blocks])
        kcols = np.arange(k * nb, k * nb + self.ext(k))
        pos, placed = 0, []
        for g in sorted(window_gathers(src, op, mrows, kcols, parent.grid.npcol), key=_sender):
            g = replace(g, offset=pos, device={})
            pack = functools.partial(_gather_packer, self.be.xp, parent, g)
            _add_message(msgs, staged, me, g.sender, receivers, pos, g.size, pack)
            placed.append(g)
            pos += g.size
        return self.loc_off(blocks[0]), len(mrows), tuple(placed)

    def _panel_packer(self, blocks: list[int], k: int) -> Any:
        """``pack(out)``: the pieces of ``blocks`` at step ``k``, stacked (transposed if the
        stored orientation requires), adjacent source rectangles copied as one."""
        A = self.A
        lay = A.layout
        tr = self.transposed
        rects: list[list[int]] = []  # [r0, c0, h, w] of A's local matrix
        for i in blocks:
            r, c = self.stored(i, k)
            (r0, c0), (h, w) = lay.local_offset(r, c), lay.block_extent(r, c)
            last = rects[-1] if rects else None
            if last and not tr and last[1] == c0 and last[3] == w and last[0] + last[2] == r0:
                last[2] += h
            elif last and tr and last[0] == r0 and last[2] == h and last[1] + last[3] == c0:
                last[3] += w
            else:
                rects.append([r0, c0, h, w])

        def pack(out: Any) -> None:
            data = A._data
            pos = 0
            for r0, c0, h, w in rects:
                blk = data[r0 : r0 + h, c0 : c0 + w]
                blk = blk.T if tr else blk
                out[pos : pos + h * w].reshape(blk.shape)[...] = blk
                pos += h * w

        return pack

    def _x_plan(self) -> engine.Plan:
        """``# X[k, :] -> grid column`` (left; grid row for right): step ``t``'s solved block
        from its owners to the processes of their grid column that still hold blocks after
        ``k`` (one in-slot message per grid column; the receivers read it in the slot)."""
        me = self.be.rank
        steps: list[tuple[engine.Message, ...]] = []
        for t, k in enumerate(self.order):
            pk = self.owner(k)
            needy = [p for p in range(self.P) if p != pk and self.trailing(t, p)[2]]
            msgs: list[engine.Message] = []
            if needy:
                for q in self.active_other:
                    sender = self.rank_at(pk, q)
                    receivers = tuple(self.rank_at(p, q) for p in needy)
                    if sender == me or me in receivers:
                        packer = self._x_packer(k) if sender == me else None
                        size = self.ext(k) * self.ext_o[q]
                        msgs.append(
                            engine.Message(sender, receivers, 0, size, packer, in_slot=True)
                        )
            steps.append(tuple(msgs))
        size = self.nb * self.max_other if self.P > 1 else 0
        return engine.Plan("trsm x_row", me, self.be.size, tuple(steps), size, size)

    def _x_packer(self, k: int) -> Any:
        xk = self.xblock(self.loc_off(k), self.loc_off(k) + self.ext(k))

        def pack(out: Any) -> None:
            out.reshape(xk.shape)[...] = xk

        return pack

    def xblock(self, lo: int, hi: int) -> Any:
        """View of the local rows (left) / columns (right) ``[lo, hi)`` of X."""
        return self.X._data[lo:hi, :] if self.ax == 0 else self.X._data[:, lo:hi]

    # -- the pipeline --
    def run(self) -> None:
        be, spec = self.be, self.spec
        comp = be.compute
        S = spec.num_stages
        lookahead = S >= 2
        T, order = self.K, self.order
        active = self.other_ext > 0
        dtype = self.X.dtype
        plan, self._stacks = self._panel_plan()
        # two exchanges alive at once, each on its own pooled channel
        panel = engine.Exchange(be, plan, dtype, engine.CallKernels(), S, channel="trsm.panel")
        xrow = engine.Exchange(be, self._x_plan(), dtype, engine.CallKernels(), S, "trsm.x")
        nbufs = min(S, T) if any(st and st[2] for st in self._stacks) else 0
        self._unpack_bufs = [be.xp.empty(plan.slot_elems, dtype) for _ in range(nbufs)]
        self._stack_memo: dict[int, tuple[int, Any]] = {}
        try:
            begin_pipeline(be, dtype)
            if spec.alpha != 1 and active:
                be.launch(comp, be.xp.multiply, self.X._data, spec.alpha, self.X._data)
            panel.send(0)
            self._solve(0, panel)
            if xrow.sends(0):
                xrow.send(0, after=be.record_event(comp))
            if T > 1 and lookahead:
                panel.send(1)
            for t in range(T):
                lo, hi, _blocks = self.trailing(t, self.me)
                work = active and hi > lo
                nxt = order[t + 1] if t + 1 < T else None
                ahead = lookahead and work and nxt is not None and self.owner(nxt) == self.me
                if work:
                    xrow.recv(t)
                    a_stack = self._stack(panel, t)
                    xk = self._xk(xrow, t)
                    if ahead:
                        # look-ahead: finish the next block, solve it, let comm send it, then
                        # do the rest of this step's trailing update
                        assert nxt is not None
                        n0, n1 = self.loc_off(nxt), self.loc_off(nxt) + self.ext(nxt)
                        self._update(a_stack, xk, n0, n1)
                        self._solve(t + 1, panel)
                        solved = be.record_event(comp)
                        self._update(a_stack, xk, *((n1, hi) if self.forward else (lo, n0)))
                    else:
                        self._update(a_stack, xk, lo, hi)
                # slots of step t are free on this process (with num_stages == 1 before the
                # solve below, which waits for step t + 1's panel in the same slot)
                panel.release(t)
                xrow.release(t)
                if nxt is not None and not lookahead:
                    panel.send(t + 1)  # one slot: step t + 1's panel once step t released it
                if nxt is not None and not ahead:
                    self._solve(t + 1, panel)
                    solved = be.record_event(comp)
                if nxt is not None:
                    if xrow.sends(t + 1):
                        xrow.send(t + 1, after=solved)  # X_{t+1} solved -> send it
                    if lookahead and t + 2 < T:
                        panel.send(t + 2)
        except BaseException:
            panel.drop()  # signal values unknown: never reuse these pools
            xrow.drop()
            raise
        engine.finish([panel, xrow])

    def _xk(self, xrow: engine.Exchange, t: int) -> Any:
        """``X_k`` on this process: its own rows of X, or the received copy (in the slot)."""
        k = self.order[t]
        if self.owner(k) == self.me:
            return self.xblock(self.loc_off(k), self.loc_off(k) + self.ext(k))
        shape = (self.ext(k), self.other_ext) if self.ax == 0 else (self.other_ext, self.ext(k))
        return xrow.view(t, 0, shape)

    def _solve(self, t: int, panel: engine.Exchange) -> None:
        """Enqueue on compute: wait for step ``t``'s panel and solve my part of ``X_k``."""
        k = self.order[t]
        if self.owner(k) != self.me or self.other_ext == 0:
            return
        be, spec = self.be, self.spec
        ek, off = self.ext(k), self.loc_off(k)
        lo, stack = self._stack(panel, t)
        akk = stack[off - lo : off - lo + ek]
        akk = akk.T if self.transposed else akk
        be.trsm(
            1,
            akk,
            self.xblock(off, off + ek),
            spec.side,
            spec.uplo,
            spec.trans,
            spec.diag,
            be.compute,
        )

    def _stack(self, panel: engine.Exchange, t: int) -> tuple[int, Any]:
        """Enqueue (once per step) the wait for step ``t``'s panel and its unpack; return
        ``(lo, stack)``: ``stack[r]`` holds the piece row of my local row ``lo + r``."""
        got = self._stack_memo.get(t)
        if got is not None:
            return got
        lo, rows, unpack = self._stacks[t]
        ek = self.ext(self.order[t])
        panel.recv(t)
        if unpack and isinstance(unpack[0], Gather):  # a window view's pieces
            buf = self._unpack_bufs[t % len(self._unpack_bufs)]
            stack = buf[: rows * ek].reshape(rows, ek)
            flat = panel.view(t, 0, (rows * ek,))
            self.be.launch(self.be.compute, _unpack_gathers, self.be.xp, flat, stack, unpack)
            self._stack_memo[t] = (lo, stack)
            return lo, stack
        slot = panel.view(t, 0, (rows, ek))
        if unpack is None:
            stack = slot
        else:
            # A[pieces of interleaved senders] -> my local order
            buf = self._unpack_bufs[t % len(self._unpack_bufs)]
            stack = buf[: rows * ek].reshape(rows, ek)
            self.be.launch(self.be.compute, _unpack, slot, stack, unpack)
        self._stack_memo[t] = (lo, stack)
        return lo, stack

    def _update(self, a_stack: tuple[int, Any], xk: Any, lo: int, hi: int) -> None:
        """Enqueue ``X[lo:hi] -= op(A)[lo:hi, k] X_k`` (left; mirrored for right): one gemm."""
        if hi <= lo:
            return
        be, spec = self.be, self.spec
        a = a_stack[1][lo - a_stack[0] : hi - a_stack[0]]
        a = a.T if self.transposed else a
        if spec.side == "L":
            be.gemm(-1, a, xk, 1, self.xblock(lo, hi), spec.trans, "N", be.compute)
        else:
            be.gemm(-1, xk, a, 1, self.xblock(lo, hi), "N", spec.trans, be.compute)


def _add_message(
    msgs: list[engine.Message],
    staged: dict[int, int],
    me: int,
    sender: int,
    receivers: tuple[int, ...],
    offset: int,
    size: int,
    packer: Any,
) -> None:
    """Count what ``sender`` stages (it is not a receiver) and, where this rank takes part,
    add the in-slot message (with ``packer()``'s pack function when this rank sends it)."""
    if sender not in receivers:
        staged[sender] = staged.get(sender, 0) + size
    if sender == me or me in receivers:
        pack = packer() if sender == me else None
        msgs.append(engine.Message(sender, receivers, offset, size, pack, in_slot=True))


def _sender(g: Gather) -> int:
    return g.sender


def _gather_packer(xp: Any, parent: BlockCyclicArray, g: Gather) -> Any:
    def pack(out: Any) -> None:
        pack_pieces(xp, parent._data, [g], out, 0)

    return pack


def _unpack_gathers(xp: Any, flat: Any, stack: Any, gathers: Sequence[Gather]) -> None:
    for g in gathers:
        _, _, dr, dc, _, _ = g.on(xp)
        put_indexed(stack, dr, dc, flat[g.offset : g.offset + g.size].reshape(g.shape))


def _unpack(slot: Any, stack: Any, moves: Sequence[tuple[int, int, int]]) -> None:
    for src, dst, rows in moves:
        stack[dst : dst + rows] = slot[src : src + rows]


@warmup_kernels
def _warm_trsm(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """``X := alpha X``; :func:`_unpack` of stacks of rows; the packs of (transposed)
    rectangles of A's panels and of X's rows."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    flat = xp.empty(4 * n * n, dtype)
    panel = xp.empty((n, n), dtype)
    xp.multiply(local, dtype.type(2), local)
    _unpack(flat[: n * n].reshape(n, n), panel, [(0, 1, 2)])
    for blk in (local[1:3, 2:5], local[1:3, 2:5].T, local[:2]):
        flat[: blk.size].reshape(blk.shape)[...] = blk
