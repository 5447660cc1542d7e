"""``bm.show_config()``: the versions, backend, grid and BLAS threads a program runs with."""

from __future__ import annotations

import os
import sys
from typing import Any

from mpi4py import MPI

from .backends import _blas_threads
from .grid import ProcessGrid

__all__ = ["show_config"]

#: reported dependencies: name -> the distributions that may provide it (first found wins)
_VERSIONS = {
    "numpy": ("numpy",),
    "scipy": ("scipy",),
    "mpi4py": ("mpi4py",),
    "threadpoolctl": ("threadpoolctl",),
    "cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy"),
    "nvshmem4py": ("nvshmem4py-cu13", "nvshmem4py-cu12"),
    "dask": ("dask",),
}


def _version(*dists: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for dist in dists:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def _blas_libraries() -> list[dict[str, Any]]:
    """The BLAS libraries loaded in this process, as threadpoolctl reports them."""
    from threadpoolctl import threadpool_info

    keys = ("internal_api", "version", "num_threads", "threading_layer", "filepath")
    libs = [{k: i.get(k) for k in keys} for i in threadpool_info() if i["user_api"] == "blas"]
    return sorted(libs, key=lambda b: str(b["filepath"]))


def _rank_config(grid: ProcessGrid) -> dict[str, Any]:
    decision = _blas_threads.current()
    be = grid.backend
    return {
        "host": MPI.Get_processor_name(),
        "device": getattr(be, "device_id", None),
        "blas_threads": None if decision is None else decision.threads,
        "blas_threads_source": None if decision is None else decision.source,
        "cpus": None if decision is None else decision.cpus,
        "ranks_sharing_cpus": None if decision is None else decision.sharing,
        "blas": _blas_libraries(),
    }


def show_config(grid: ProcessGrid | None = None, mode: str = "stdout") -> dict[str, Any] | None:
    """Describe the configuration the program runs with (like :func:`numpy.show_config`).
    Collective over the grid's communicator.

    Reports the versions of the library and its dependencies, the MPI library, the backend and
    the grid, the nodes and ranks per node, and for each rank the BLAS libraries loaded in its
    process with their thread counts as threadpoolctl reports them, and where the thread count
    came from (see the "Defaults" page: by default each rank gets its share of the node's cores).

    Parameters
    ----------
    grid : ProcessGrid, optional
        The grid to describe; default ``ProcessGrid()`` over ``MPI.COMM_WORLD`` (creating it sets
        the BLAS threads if no grid did before).
    mode : {'stdout', 'dicts'}
        ``'stdout'``: rank 0 of the grid prints the description and ``None`` is returned on
        every rank. ``'dicts'``: the description is returned on every rank.

    Returns
    -------
    config : dict or None
        With ``mode='dicts'``: keys ``'blasmp_array'``, ``'python'``, ``'versions'``,
        ``'mpi_library'``, ``'backend'``, ``'grid'``, ``'ranks'``, ``'nodes'``,
        ``'ranks_per_node'`` and ``'per_rank'`` (a list, one dict per rank with ``'host'``,
        ``'device'``, ``'blas_threads'``, ``'blas_threads_source'``, ``'cpus'``,
        ``'ranks_sharing_cpus'`` and ``'blas'``, the libraries with their ``'num_threads'``).

    Examples
    --------
    >>> import blasmp_array as bm
    >>> bm.show_config()  # doctest: +SKIP
    """
    if mode not in ("stdout", "dicts"):
        raise ValueError(f"show_config: mode must be 'stdout' or 'dicts', got {mode!r}")
    if grid is not None and not isinstance(grid, ProcessGrid):
        raise TypeError(f"show_config: grid must be a ProcessGrid, got {type(grid).__name__}")
    if grid is None:
        grid = ProcessGrid()
    per_rank = grid.comm.allgather(_rank_config(grid))
    hosts: dict[str, int] = {}
    for r in per_rank:
        hosts[r["host"]] = hosts.get(r["host"], 0) + 1
    config = {
        "blasmp_array": _version("blasmp_array"),
        "python": sys.version.split()[0],
        "versions": {name: _version(*dists) for name, dists in _VERSIONS.items()},
        "mpi_library": " ".join(MPI.Get_library_version().split("\n")[0].split()),
        "backend": grid.backend.name,
        "grid": grid.shape,
        "ranks": grid.size,
        "nodes": len(hosts),
        "ranks_per_node": hosts,
        "cpu_count": os.cpu_count(),
        "per_rank": per_rank,
    }
    if mode == "dicts":
        return config
    if grid.rank == 0:
        print(format_config(config), flush=True)
    return None


def format_config(config: dict[str, Any]) -> str:
    """The text :func:`show_config` prints for ``config`` (its ``mode='dicts'`` output)."""
    versions = ", ".join(f"{d} {v}" for d, v in config["versions"].items() if v)
    pr, pc = config["grid"]
    lines = [
        f"blasmp_array {config['blasmp_array']} (Python {config['python']})",
        f"  dependencies: {versions}",
        f"  MPI: {config['mpi_library']}",
        f"  backend: {config['backend']}, grid {pr}x{pc}, {config['ranks']} rank(s) on "
        f"{config['nodes']} node(s): "
        + ", ".join(f"{h} {n}" for h, n in config["ranks_per_node"].items()),
    ]
    groups: dict[str, list[int]] = {}
    for rank, r in enumerate(config["per_rank"]):
        libs = "; ".join(
            f"{b['internal_api']} {b['version'] or ''} {b['num_threads']} thread(s) "
            f"[{os.path.basename(str(b['filepath'] or ''))}]".replace("  ", " ")
            for b in r["blas"]
        )
        source = r["blas_threads_source"]
        how = (
            f"{r['blas_threads']} BLAS thread(s) per rank ({source}; {r['cpus']} CPU(s) shared "
            f"by {r['ranks_sharing_cpus']} rank(s))"
            if r["blas_threads"] is not None
            else f"BLAS threads left to ${source}"
            if source
            else "BLAS threads not set"
        )
        text = f"{how}: {libs or 'no BLAS loaded'}"
        if config["backend"] == "gpu":
            text = f"GPU {r['device']}, " + text
        groups.setdefault(text, []).append(rank)
    for text, ranks in groups.items():
        lines.append(f"  rank(s) {_ranges(ranks)}: {text}")
    return "\n".join(lines)


def _ranges(ranks: list[int]) -> str:
    out: list[str] = []
    start = prev = ranks[0]
    for r in ranks[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)
