"""The rule choosing the block of a factorisation's working copy
(``ops/engine/_factor_block.py``)."""

from __future__ import annotations

import pytest

from blasmp_array.ops.engine import _factor_block as fb


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(
        fb, "TABLE", {"gpu": {"cholesky": ((0, 512), (8192, 1024)), "lu": ((4096, 2048),)}}
    )
    monkeypatch.setattr(fb, "MIN_BLOCK", 256)
    monkeypatch.setattr(fb, "MIN_BLOCKS_PER_PROCESS", 2)
    monkeypatch.setattr(fb, "enabled", True)


def test_the_row_with_the_largest_n_min_below_n(table):
    assert fb.working_block("gpu", (2, 2), 16384, "cholesky", 256) == 1024
    assert fb.working_block("gpu", (2, 2), 8192, "cholesky", 256) == 1024
    assert fb.working_block("gpu", (2, 2), 8191, "cholesky", 256) == 512
    assert fb.working_block("gpu", (2, 2), 16384, "lu", 256) == 2048


def test_sizes_below_every_row_keep_the_callers_block(table):
    assert fb.working_block("gpu", (2, 2), 4095, "lu", 256) == 256


def test_every_process_keeps_blocks(table):
    # 2 blocks per process row and column: block <= n / (2 * max(Pr, Pc)), halving
    assert fb.working_block("gpu", (2, 2), 4096, "lu", 256) == 1024
    assert fb.working_block("gpu", (1, 4), 8192, "lu", 256) == 1024
    # the cap would go below MIN_BLOCK: keep the caller's block
    assert fb.working_block("gpu", (1, 8), 2048, "cholesky", 128) == 128


def test_never_smaller_than_the_callers_block(table):
    assert fb.working_block("gpu", (2, 2), 16384, "cholesky", 2048) == 2048
    assert fb.working_block("gpu", (2, 2), 16384, "cholesky", 1024) == 1024


def test_one_process_other_backends_and_off_keep_the_block(table, monkeypatch):
    assert fb.working_block("gpu", (1, 1), 16384, "cholesky", 256) == 256
    assert fb.working_block("cpu", (2, 2), 16384, "cholesky", 256) == 256
    monkeypatch.setattr(fb, "enabled", False)
    assert fb.working_block("gpu", (2, 2), 16384, "cholesky", 256) == 256


def test_shipped_table_is_well_formed():
    for backend, entries in fb.TABLE.items():
        assert backend in ("cpu", "gpu")
        for name, rows in entries.items():
            assert name in ("cholesky", "lu", "qr")
            assert list(rows) == sorted(rows) and all(b >= fb.MIN_BLOCK for _, b in rows)
