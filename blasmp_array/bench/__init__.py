"""The check/profile command line (``python -m blasmp_array.bench``).

``python -m blasmp_array.bench OP [--check] [--profile] [--compare] ...`` builds grid-independent
random operands for OP (gemm, symm, syrk, syr2k, trmm, trsm, the NumPy-face calls, cholesky, lu,
redistribute, transpose, and the data rows random, from_numpy, to_numpy, to_zarr, from_zarr,
to_dask, ...), checks the result against NumPy/SciPy in units of machine epsilon (data movement:
exact equality), times warm-up + repeats (median, min, max, GFLOP/s or GB/s per rank and in
total) and optionally measures reference libraries in the same run. Modules: :mod:`.operators`
(what runs and how it is checked), :mod:`.door` (the data rows and their checks),
:mod:`.compare` (baselines; the data rows' peers in :mod:`.door_peers`; the MPI ones in
:mod:`.mpi_baselines`, :mod:`.heat_adapter`, :mod:`.pblas_adapter`), :mod:`.timing` (the timing
loop), :mod:`.report` (environment, tables, JSON/CSV/plot), :mod:`.cli` (the command).
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from .cli import main as _main

    return _main(argv)
