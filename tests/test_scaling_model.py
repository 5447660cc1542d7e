"""Limiting cases of tools/scaling_model.py (the multi-GPU alpha-beta + compute model)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tool_module import load_tool

sm = load_tool("scaling_model")

OPS = ("gemm", "syrk", "trsm")
GRIDS = [(1, 2), (2, 1), (2, 2), (1, 4), (2, 4), (4, 2)]
#: no latency, infinite link and HBM bandwidth, rank-k updates as fast as a full DGEMM
IDEAL = sm.Machine(latency=0.0, link_bw=math.inf, hbm_bw=math.inf, update_eff_1024=1.0)


@pytest.mark.parametrize("grid", GRIDS)
def test_gemm_ideal_machine_scales_perfectly(grid: tuple[int, int]) -> None:
    # n a multiple of b * Pr * Pc: no load imbalance, so only communication could cost
    n, b = 8192, 512
    p = grid[0] * grid[1]
    rate = sm.predict("gemm", n, *grid, b, IDEAL)
    assert rate == pytest.approx(p * sm.predict("gemm", n, 1, 1, b, IDEAL), rel=1e-12)
    # weak sizes are not always balanced (e.g. 45 blocks on 2 processes): at most 1
    assert sm.weak_efficiency("gemm", *grid, 512, IDEAL) <= 1 + 1e-12


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("b", [256, 1024])
def test_one_gpu_is_the_one_gpu_rate(op: str, b: int) -> None:
    m = sm.Machine()
    for n in (4096, 16384, 10000):
        t = sm.TIMES[op](n, 1, 1, b, m)
        if op == "gemm":
            assert t == sm.flops(op, n) / m.gemm_rate
        elif op == "syrk":
            assert t == sm.flops(op, n) / m.gemm_rate  # syrk_rate None -> DGEMM rate
        else:
            # the blocked algorithm with no communication: diagonal solves + trailing GEMMs
            nk = -(-n // b)
            w = [min(b, n - k * b) for k in range(nk)]
            solve = sum(x * x * n for x in w) / m.trsm_rate
            upd = sum(2.0 * w[k] * sum(w[k + 1 :]) * n for k in range(nk))
            assert t == pytest.approx(solve + upd / (m.gemm_rate * m.update_eff(b)), rel=1e-12)
        assert sm.weak_efficiency(op, 1, 1, b, m) == pytest.approx(1.0, rel=1e-12)
        assert sm.best_speedup(op, n, 1, b, m) == (1.0, (1, 1))


def test_syrk_one_gpu_uses_its_own_rate() -> None:
    m = sm.Machine(syrk_rate=40e12)
    assert sm.TIMES["syrk"](8192, 1, 1, 512, m) == sm.flops("syrk", 8192) / 40e12


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("grid", GRIDS)
def test_efficiency_decreases_with_latency(op: str, grid: tuple[int, int]) -> None:
    effs = [
        sm.weak_efficiency(op, *grid, 1024, replace(sm.Machine(), latency=a))
        for a in (0.0, 45e-6, 1e-3, 1e-2)
    ]
    assert all(x > y for x, y in zip(effs, effs[1:], strict=False)), effs
    assert all(0 < e <= 1 for e in effs)


@pytest.mark.parametrize("op", OPS)
def test_efficiency_increases_with_bandwidth(op: str) -> None:
    effs = [
        sm.weak_efficiency(op, 2, 4, 1024, replace(sm.Machine(), link_bw=bw))
        for bw in (1e9, 1e10, 1e11, math.inf)
    ]
    assert all(x < y for x, y in zip(effs, effs[1:], strict=False)), effs


@pytest.mark.parametrize("op", OPS)
def test_single_stage_is_never_faster(op: str) -> None:
    m = replace(sm.Machine(), link_bw=50e9)
    for r, c in GRIDS:
        t1 = sm.TIMES[op](16384, r, c, 1024, m, stages=1)
        t2 = sm.TIMES[op](16384, r, c, 1024, m, stages=2)
        assert t1 >= t2


def test_update_efficiency_matches_the_measured_point() -> None:
    m = sm.Machine(update_eff_1024=0.9)
    assert m.update_eff(1024) == pytest.approx(0.9)
    assert m.update_eff(512) < 0.9 < m.update_eff(2048) < 1


@pytest.mark.parametrize("n", [1, 100, 1024, 4097, 65536])
@pytest.mark.parametrize("b", [1, 64, 1000])
@pytest.mark.parametrize("p", [1, 3, 8])
def test_numroc_partitions_the_dimension(n: int, b: int, p: int) -> None:
    parts = [sm.numroc(n, b, i, p) for i in range(p)]
    assert sum(parts) == n
    # block counts differ by at most one block
    assert max(parts) - min(parts) <= b


def test_weak_n_is_a_multiple_of_the_block() -> None:
    for p in range(1, 9):
        n = sm.weak_n(p, 16384, 1024)
        assert n % 1024 == 0 and abs(n - 16384 * math.sqrt(p)) <= 512


def test_report_runs() -> None:
    lines = sm.report(sm.Machine(), (1024,), "t")
    assert any(line.startswith("2x4") for line in lines)
