"""Property tests of the one-sided redistribution plans (ops/engine/redistribute.py); no MPI.

The plans of every rank of a grid are built in one process and run by a simulator of the
engine's data movement (pack into a staging range, copy into the receiver's slot at the
message's offset, unpack; local copies), so rank counts and grids that CI does not launch
(e.g. 8 ranks, 2x4) are covered too. Checked: every element of every (NaN-poisoned)
destination receives its value, from C-ordered and from transposed (strided) sources, messages
of one step never overlap in a receiver's slot, and slot/staging sizes are equal on every rank
and large enough.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blasmp_array.layout import BlockCyclicLayout
from blasmp_array.ops.engine import redistribute as rd


def _local(a: np.ndarray, layout: BlockCyclicLayout, p: int, q: int) -> np.ndarray:
    return np.ascontiguousarray(a[np.ix_(layout.local_rows(p), layout.local_cols(q))])


def _ranks(pr: int, pc: int, perm: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(perm[p * pc + q]) for q in range(pc)) for p in range(pr))


def _simulate(a, src, src_ranks, dst, dst_ranks, h, conjugate=False, strided=False, window=None):
    """Run the plans of all ranks; return every rank's destination local matrix."""
    window = rd._whole(src.shape) if window is None else window
    nranks = src.grid_shape[0] * src.grid_shape[1]
    coords = lambda table, r: next(  # noqa: E731
        (p, q) for p, row in enumerate(table) for q, x in enumerate(row) if x == r
    )
    plans, kernels, dsts = [], [], []
    for r in range(nranks):
        sp, sq = coords(src_ranks, r)
        dp, dq = coords(dst_ranks, r)
        s_local = _local(a, src, sp, sq)
        if strided:  # the source as the transposed view of its transpose (as A.T is)
            s_local = np.ascontiguousarray(s_local.T).T
        d_local = np.full(dst.local_shape(dp, dq), np.nan, a.dtype)
        plans.append(rd._build_plan(r, nranks, np, src, src_ranks, dst, dst_ranks, window, h))
        kernels.append(rd._Kernels(s_local, d_local, conjugate, np))
        dsts.append(d_local)
    slot = {p.slot_elems for p in plans}
    stage = {p.stage_elems for p in plans}
    assert len(slot) == 1 and len(stage) == 1, (slot, stage)
    nsteps = {len(p.steps) for p in plans}
    assert len(nsteps) == 1
    for k in range(nsteps.pop()):
        slots = [np.full(plans[0].slot_elems, np.nan, a.dtype) for _ in range(nranks)]
        used = [np.zeros(plans[0].slot_elems, dtype=np.int64) for _ in range(nranks)]
        staged = [0] * nranks
        for r, plan in enumerate(plans):
            for msg in plan.steps[k]:
                if msg.sender == r and r in msg.receivers:
                    kernels[r].local(msg)
                elif msg.sender == r:
                    out = np.empty(msg.size, a.dtype)
                    kernels[r].pack(msg, out)
                    staged[r] += msg.size
                    for q in msg.receivers:
                        used[q][msg.offset : msg.offset + msg.size] += 1
                        slots[q][msg.offset : msg.offset + msg.size] = out
        assert max(staged) <= plans[0].stage_elems
        for r in range(nranks):
            assert used[r].max(initial=0) <= 1, "messages overlap in a slot"
        for r, plan in enumerate(plans):
            for msg in plan.steps[k]:
                if msg.sender != r and r in msg.receivers:
                    kernels[r].unpack(msg, slots[r][msg.offset : msg.offset + msg.size])
    return dsts


layouts = st.tuples(
    st.integers(1, 40),  # m
    st.integers(1, 40),  # n
    st.sampled_from([(1, 8), (8, 1), (2, 4), (4, 2), (1, 6), (2, 3), (3, 2), (6, 1), (1, 1)]),
    st.integers(1, 9),  # mb
    st.integers(1, 9),  # nb
)


@settings(max_examples=120, deadline=None)
@given(
    layouts,
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(0, 7),
    st.integers(1, 50),
    st.booleans(),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_plans_move_every_element(lay, dmb, dnb, shift, h, conj, strided, rnd):
    m, n, (pr, pc), mb, nb = lay
    nranks = pr * pc
    grids = [(p, nranks // p) for p in range(1, nranks + 1) if nranks % p == 0]
    dpr, dpc = rnd.choice(grids)
    src = BlockCyclicLayout((m, n), (mb, nb), (pr, pc), (shift % pr, shift % pc))
    dst = BlockCyclicLayout((m, n), (dmb, dnb), (dpr, dpc), (0, (shift + 1) % dpc))
    perm = np.arange(nranks)
    rnd.shuffle(perm)
    src_ranks = _ranks(pr, pc, np.arange(nranks))
    dst_ranks = _ranks(dpr, dpc, perm)
    a = np.arange(m * n, dtype=np.float64).reshape(m, n) + 1.0
    a = a + 1j * a if conj else a
    dsts = _simulate(a, src, src_ranks, dst, dst_ranks, h, conjugate=conj, strided=strided)
    want = a.conj() if conj else a
    for r in range(nranks):
        p, q = next((p, q) for p in range(dpr) for q in range(dpc) if dst_ranks[p][q] == r)
        np.testing.assert_array_equal(dsts[r], _local(want, dst, p, q))


@settings(max_examples=120, deadline=None)
@given(
    layouts,
    st.integers(1, 9),
    st.integers(1, 9),
    st.tuples(*[st.integers(0, 12)] * 6),
    st.integers(1, 50),
    st.randoms(use_true_random=False),
)
def test_window_plans_move_exactly_the_window(lay, dmb, dnb, offsets, h, rnd):
    """``D[k0:k0+m, l0:l0+n] = S[i0:i0+m, j0:j0+n]`` (offsets anywhere inside blocks): every
    element of the destination window is written and nothing outside it (NaN stays NaN)."""
    m, n, (pr, pc), mb, nb = lay
    i0, j0, k0, l0, extra_r, extra_c = offsets
    nranks = pr * pc
    grids = [(p, nranks // p) for p in range(1, nranks + 1) if nranks % p == 0]
    dpr, dpc = rnd.choice(grids)
    src = BlockCyclicLayout((i0 + m + extra_r, j0 + n), (mb, nb), (pr, pc), (1 % pr, 0))
    dst = BlockCyclicLayout((k0 + m, l0 + n + extra_c), (dmb, dnb), (dpr, dpc), (0, 1 % dpc))
    table = _ranks(pr, pc, np.arange(nranks))
    dtable = _ranks(dpr, dpc, np.arange(nranks))
    a = np.arange(src.shape[0] * src.shape[1], dtype=np.float64).reshape(src.shape) + 1.0
    window = ((i0, j0), (k0, l0), (m, n))
    dsts = _simulate(a, src, table, dst, dtable, h, window=window)
    want = np.full(dst.shape, np.nan)
    want[k0 : k0 + m, l0 : l0 + n] = a[i0 : i0 + m, j0 : j0 + n]
    for r in range(nranks):
        p, q = divmod(r, dpc)
        np.testing.assert_array_equal(dsts[r], _local(want, dst, p, q))


@pytest.mark.parametrize("block", [1, 2, 3, 7])
def test_many_rectangles_fall_back_to_index_arrays(block):
    """Block 1 against block 2 gives messages of many 1-element runs: index arrays."""
    src = BlockCyclicLayout((40, 41), (block, block), (2, 2))
    dst = BlockCyclicLayout((40, 41), (block + 1, block + 1), (2, 2))
    table = _ranks(2, 2, np.arange(4))
    plan = rd._build_plan(0, 4, np, src, table, dst, table, rd._whole(src.shape), 40)
    rects = [m.pack or m.unpack for step in plan.steps for m in step]
    if block == 1:
        assert any(isinstance(r, rd._Rect) and not r.loops for r in rects)
        assert any(isinstance(r, rd._LocalCopy) and r.pieces is None for r in rects)
    a = np.arange(40 * 41, dtype=np.float64).reshape(40, 41)
    dsts = _simulate(a, src, table, dst, table, 40)
    for r in range(4):
        np.testing.assert_array_equal(dsts[r], _local(a, dst, r // 2, r % 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_kernel_warmup_runs(dtype):
    """The warm-up only runs where kernels are compiled lazily (GPU): run it here once so that
    a mistake in it cannot first show on a GPU node."""

    rd._warm_redistribute(None, np, np.dtype(dtype))


def test_positions_index_is_a_slice_only_for_one_ascending_run():
    """Runs become slices (block copies, views); any other order stays an index array in its
    order -- a permutation whose first and last entries span exactly its length included."""
    from blasmp_array.ops.engine._exchange import positions_index

    assert positions_index(np.arange(3, 8), np) == slice(3, 8)
    assert positions_index(np.array([5]), np) == slice(5, 6)
    assert positions_index(np.array([], dtype=np.int64), np) == slice(0, 0)
    for order in ([3, 5, 4, 6], [4, 3, 5], [2, 4, 6], [6, 5, 4]):
        ix = positions_index(np.array(order), np)
        assert not isinstance(ix, slice)
        np.testing.assert_array_equal(np.arange(10)[ix], order)
