"""The host copy of ``backends/_host_copy.py`` (``?omatcopy`` for transposing copies) against
NumPy: every dtype, conjugated or not, C- and Fortran-ordered targets, strided views inside a
NaN-filled buffer (the guard around the target must stay NaN), single rows and columns, empty
arrays, and the shapes that go to NumPy (no transposition, a non-unit inner stride, overlap,
casting). Each case runs once through the BLAS and once with the BLAS turned off."""

from __future__ import annotations

import numpy as np
import pytest

from blasmp_array.backends import _host_copy as hc

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _matrix(rng: np.random.Generator, shape: tuple[int, int], dtype) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.fixture(params=["blas", "numpy"])
def route(request, monkeypatch):
    """The BLAS route where the library has ``?omatcopy`` (from the smallest size on, so
    that the test shapes take it); NumPy's with it turned off."""
    if request.param == "blas":
        if not hc.omatcopy_available():
            pytest.skip("the loaded BLAS has no ?omatcopy")
        monkeypatch.setattr(hc, "_MIN_SIZE", 1)
    else:
        monkeypatch.setattr(hc, "_routines", [None])
        assert not hc.omatcopy_available()
    return request.param


def _sources(x: np.ndarray) -> dict[str, np.ndarray]:
    """Views of ``x`` (m x n) as a column-major ``n x m`` source and a few others."""
    m, n = x.shape
    wide = np.zeros((m + 3, 2 * n + 5), x.dtype)
    wide[2 : m + 2, 3 : 2 * n + 3 : 2] = x  # rows of stride 2n+5, columns of stride 2
    padded = np.zeros((m + 3, n + 7), x.dtype)
    padded[1 : m + 1, 4 : n + 4] = x
    return {
        "transposed": x.T,  # column-major: the BLAS route
        "transposed of a padded view": padded[1 : m + 1, 4 : n + 4].T,
        "fortran": np.asfortranarray(x.T),
        "same order": np.ascontiguousarray(x.T),
        "non-unit inner stride": wide[2 : m + 2, 3 : 2 * n + 3 : 2].T,
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("conjugate", [False, True])
@pytest.mark.parametrize("order", ["C", "F"])
def test_assign_matches_numpy(route, dtype, conjugate, order):
    rng = np.random.default_rng(7)
    x = _matrix(rng, (37, 53), dtype)
    for what, src in _sources(x).items():
        assert src.shape == (53, 37)
        guard = np.full((60, 45), np.nan, dtype, order=order)
        out = guard[3:56, 5:42]
        hc.assign(out, src, conjugate)
        expect = np.conj(src) if conjugate else src
        assert np.array_equal(out, expect), f"{what}: {route}"
        inside = np.zeros(guard.shape, bool)
        inside[3:56, 5:42] = True
        assert np.isnan(guard[~inside].real).all(), f"{what}: wrote outside the target"


@pytest.mark.parametrize("dtype", DTYPES)
def test_assign_edge_shapes(route, dtype):
    rng = np.random.default_rng(3)
    for m, n in ((1, 9), (9, 1), (1, 1), (2, 2), (0, 5), (5, 0)):
        x = _matrix(rng, (m, n), dtype)
        for conjugate in (False, True):
            out = np.full((n, m), np.nan, dtype)
            hc.assign(out, x.T, conjugate)
            assert np.array_equal(out, np.conj(x.T) if conjugate else x.T), (m, n, conjugate)


def test_assign_casts_and_handles_overlap(route):
    rng = np.random.default_rng(5)
    x = _matrix(rng, (8, 8), np.float64)
    out = np.full((8, 8), np.nan, np.complex128)  # a cast: NumPy's route
    hc.assign(out, x.T, conjugate=True)
    assert np.array_equal(out, x.T.astype(np.complex128))
    y = x.copy()
    hc.assign(y, y.T)  # in place: overlapping, NumPy's route (which buffers the transpose)
    assert np.array_equal(y, x.T)


def test_real_conjugate_is_a_copy(route):
    x = np.arange(12.0).reshape(3, 4)
    out = np.full((4, 3), np.nan)
    hc.assign(out, x.T, conjugate=True)
    assert np.array_equal(out, x.T)


def test_blas_route_is_taken_for_a_transposing_copy(monkeypatch):
    """A transposing copy of host floats calls ``?omatcopy`` from ``_MIN_SIZE`` elements on; a
    plain one does not."""
    if not hc.omatcopy_available():
        pytest.skip("the loaded BLAS has no ?omatcopy")
    small = np.ones((3, 5))
    lib = hc._library()
    calls: list[str] = []
    real = lib.routine

    def counting(dtype, name):
        calls.append(np.dtype(dtype).char + name)
        return real(dtype, name)

    monkeypatch.setattr(lib, "routine", counting)
    hc.assign(np.empty((5, 3)), small.T)  # below _MIN_SIZE: NumPy's copy
    assert calls == []
    monkeypatch.setattr(hc, "_MIN_SIZE", 1)
    x = np.ones((4, 6), np.float32)
    hc.assign(np.empty((6, 4), np.float32), x.T, conjugate=True)
    hc.assign(np.empty((4, 6), np.float32), x)
    assert calls == ["fomatcopy"]
    # complex: NumPy (the BLAS's alpha = 1 product is no copy of NaN, inf or -0.0)
    z = np.ones((4, 6), np.complex128)
    hc.assign(np.empty((6, 4), np.complex128), z.T, conjugate=True)
    assert calls == ["fomatcopy"]
    # two disjoint blocks of one matrix (mirrored blocks): the BLAS; overlapping ones: NumPy
    m = np.arange(64.0).reshape(8, 8)
    expect = m[4:8, 0:4].T.copy()
    hc.assign(m[0:4, 4:8], m[4:8, 0:4].T)
    assert calls == ["fomatcopy", "domatcopy"]
    assert np.array_equal(m[0:4, 4:8], expect)
    hc.assign(m[0:4, 0:4], m[2:6, 2:6].T)
    assert calls == ["fomatcopy", "domatcopy"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposing_copy_is_exact_for_special_values(dtype):
    """NaN (with a payload), infinities and signed zeros, in either part of a complex
    number, come out bit for bit (signaling NaNs aside: see the module docstring)."""
    rng = np.random.default_rng(0)
    real = np.dtype(dtype).kind != "c"
    x = rng.standard_normal((7, 5)).astype(dtype)
    specials = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0]
    for i, v in enumerate(specials):
        if real:
            x[i, i % 5] = v
        else:
            x[i, i % 5] = complex(v, 1.5) if i % 2 else complex(-0.0, v)
    payload = x.view(np.uint64 if x.itemsize == 8 else np.uint32)
    payload[6, 0] = payload[0, 0] | 0x5  # a quiet NaN with payload bits (real part's bits)
    for conjugate in (False, True) if not real else (False,):
        out = np.full((5, 7), 3, dtype)
        hc.assign(out, x.T, conjugate=conjugate)
        ref = np.ascontiguousarray(x.T.conj() if conjugate else x.T)
        assert out.tobytes() == ref.tobytes(), f"{np.dtype(dtype).name} conj={conjugate}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_put_and_take_rows_match_numpy(dtype):
    """Runs of rows (slices) between row- and column-major matrices, index arrays, and a stack
    of matrices (3-D): the same elements as NumPy's assignments."""
    rng = np.random.default_rng(3)
    src = rng.standard_normal((9, 5)).astype(dtype)
    for order in ("C", "F"):
        for idx in (slice(2, 7), np.array([6, 0, 3])):
            n = len(range(9)[idx]) if isinstance(idx, slice) else idx.size
            dst = np.full((9, 5), np.nan, dtype, order=order)
            hc.put_rows(dst, idx, src[:n])
            ref = np.full((9, 5), np.nan, dtype)
            ref[idx] = src[:n]
            assert np.array_equal(dst, ref, equal_nan=True)
            out = np.full((n, 5), np.nan, dtype, order=order)
            hc.take_rows(out, np.asfortranarray(src) if order == "C" else src, idx)
            assert np.array_equal(out, src[idx])
    stack = np.zeros((3, 2, 5), dtype)
    hc.put_rows(stack, slice(1, 3), src[:4].reshape(2, 2, 5))
    assert np.array_equal(stack[1:], src[:4].reshape(2, 2, 5)) and not stack[0].any()
