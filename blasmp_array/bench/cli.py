"""``python -m blasmp_array.bench OP [options]``: check and profile one distributed operator.

Runs on every rank (``mpiexec -n N python -m blasmp_array.bench gemm --n 4096 --profile``); rank
0 prints the table and writes the files. See ``--help`` and ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser"]


def _pair(text: str, sep: str = "x") -> tuple[int, int]:
    parts = text.lower().split(sep)
    try:
        if len(parts) == 1:
            v = int(parts[0])
            return (v, v)
        if len(parts) == 2:
            return (int(parts[0]), int(parts[1]))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected N or AxB (e.g. 256 or 2x3), got {text!r}")


def _grid_arg(text: str) -> tuple[int, int]:
    g = _pair(text)
    if "x" not in text.lower():
        raise argparse.ArgumentTypeError(f"a grid is PRxPC (e.g. 2x2), got {text!r}")
    return g


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _nonneg(text: str) -> int:
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from .operators import OPERATORS

    p = argparse.ArgumentParser(
        prog="python -m blasmp_array.bench",
        description="Check (numerical error vs NumPy/SciPy) and profile (timing, GFLOP/s) a "
        "distributed blasmp_array operator. Run under mpiexec for several ranks; rank 0 prints.",
    )

    def ops(text: str) -> list[str]:
        names = [t.strip() for t in text.split(",") if t.strip()]
        unknown = [t for t in names if t not in OPERATORS]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown operator(s) {unknown or text!r}; choose from {', '.join(OPERATORS)} "
                "(several: comma-separated, e.g. matmul,matmul_ata,solve_triangular)"
            )
        return names

    p.add_argument(
        "op",
        type=ops,
        metavar="OP[,OP...]",
        help=f"operator(s) to run, comma-separated: {', '.join(OPERATORS)}",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compare with NumPy/SciPy on the gathered matrices (error in eps units)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="time warm-up + repeats; median, min, max, GFLOP/s (the default action)",
    )
    p.add_argument("--n", type=_positive, default=1024, help="size n (default 1024)")
    p.add_argument("--m", type=_positive, default=None, help="rows m (default n)")
    p.add_argument("--k", type=_positive, default=None, help="inner dimension k (default n)")
    p.add_argument("--block", type=_pair, default=(256, 256), help="block NB or MBxNB (256)")
    p.add_argument(
        "--grid",
        type=_grid_arg,
        default=None,
        help="process grid PRxPC (default: the most square grid of the ranks)",
    )
    p.add_argument(
        "--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"]
    )
    p.add_argument(
        "--num-stages",
        type=_positive,
        default=None,
        help="pipeline stages (default: the operator's)",
    )
    p.add_argument(
        "--backend",
        choices=["cpu", "gpu"],
        default=None,
        help="default: $BLASMP_BACKEND, else gpu if usable, else cpu",
    )
    p.add_argument("--side", choices=["left", "right"], default="left")
    p.add_argument("--uplo", choices=["lower", "upper"], default="lower")
    p.add_argument("--trans", choices=["N", "T", "C"], default="N")
    p.add_argument(
        "--to-grid",
        type=_grid_arg,
        default=None,
        help="redistribute: target grid (default: the transposed grid; pass --grid's value for a "
        "block change only)",
    )
    p.add_argument(
        "--to-block",
        type=_pair,
        default=None,
        help="redistribute: target block (default: half the block; pass --block's value for a "
        "grid change only)",
    )
    p.add_argument(
        "--root",
        type=_nonneg,
        default=None,
        help="from_numpy: the matrix is on this rank only (default: on every rank); "
        "to_numpy_root: the rank that gathers (default 0)",
    )
    p.add_argument(
        "--dir",
        default=None,
        metavar="DIR",
        help="to_zarr, from_zarr: the stores (ours and the peers') go into a fresh directory "
        "made in DIR, which every rank must see, and removed at the end (default: the system's "
        "temporary directory of rank 0)",
    )
    p.add_argument("--repeat", type=_positive, default=5, help="timed repeats (5)")
    p.add_argument("--warmup", type=_nonneg, default=1, help="untimed warm-up runs (1)")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="run over --sizes x --grids x --blocks (progress bar on rank 0)",
    )
    p.add_argument(
        "--sizes",
        type=_int_list,
        default=None,
        help="sweep sizes, m = n = k (default: n/4, n/2, n)",
    )
    p.add_argument(
        "--grids",
        default=None,
        help="sweep grids, comma-separated PRxPC (default: every factorisation)",
    )
    p.add_argument("--blocks", type=_int_list, default=None, help="sweep block sizes")
    p.add_argument(
        "--compare",
        action="store_true",
        help="also time NumPy/SciPy (1 process), dask.array, CuPy (rank 0) and Heat (every rank; "
        "gemm, trsm), ScaLAPACK (every rank; gemm, trsm, cholesky, lu) if installed; with "
        "--check their results are checked; the data rows (random, from_numpy, to_numpy, "
        "to_zarr, from_zarr, to_dask) against NumPy, CuPy, Dask and zarr (docs/checking.md)",
    )
    p.add_argument(
        "--compare-threads",
        type=_positive,
        default=None,
        help="BLAS threads / workers of the baselines (default: number of ranks)",
    )
    p.add_argument(
        "--baselines",
        default="numpy,dask,zarr,cupy,heat,scalapack4py",
        help="comma-separated baselines of --compare (default: all of "
        "numpy,dask,zarr,cupy,heat,scalapack4py; also cublasmp, cusolvermp)",
    )
    p.add_argument("--plot", default=None, metavar="PNG", help="GFLOP/s vs size plot")
    p.add_argument("--json", default=None, metavar="FILE", help="write all results as JSON")
    p.add_argument("--csv", default=None, metavar="FILE", help="write all results as CSV")
    p.add_argument(
        "--trace", default=None, metavar="FILE", help="Perfetto trace of one extra (untimed) run"
    )
    p.add_argument("--quiet", action="store_true", help="no table")
    return p


def _cases(args: argparse.Namespace, nranks: int) -> list[Any]:
    from .operators import Case

    common = dict(
        dtype=args.dtype,
        num_stages=args.num_stages,
        backend=args.backend,
        side=args.side,
        lower=args.uplo == "lower",
        trans=args.trans,
        to_grid=args.to_grid,
        to_block=args.to_block,
        root=args.root,
    )
    if not args.sweep:
        n = args.n
        return [
            Case(op, args.m or n, n, args.k or n, block=args.block, grid=args.grid, **common)
            for op in args.op
        ]
    sizes = args.sizes or sorted({max(1, args.n // 4), max(1, args.n // 2), args.n})
    if args.grids:
        grids = [_grid_arg(g.strip()) for g in args.grids.split(",") if g.strip()]
    elif args.grid:
        grids = [args.grid]
    else:
        grids = [(p, nranks // p) for p in range(1, nranks + 1) if nranks % p == 0]
    blocks = [(b, b) for b in args.blocks] if args.blocks else [args.block]
    return [
        Case(op, s, s, s, block=b, grid=g, **common)
        for op, s, g, b in itertools.product(args.op, sizes, grids, blocks)
    ]


def _check_cases(cases: list[Any], nranks: int) -> None:
    for c in cases:
        for name, g in (("grid", c.grid), ("to-grid", c.to_grid)):
            if g is not None and g[0] * g[1] != nranks:
                raise SystemExit(
                    f"error: --{name} {g[0]}x{g[1]} needs {g[0] * g[1]} ranks but the job has "
                    f"{nranks}; run with `mpiexec -n {g[0] * g[1]}` or pick PR*PC == {nranks}"
                )
        if c.root is not None and c.root >= nranks:
            raise SystemExit(f"error: --root {c.root} is not a rank of a {nranks}-rank job")


def run_case(
    case: Any, args: argparse.Namespace, trace_path: str | None, directory: Path | None = None
) -> dict[str, Any]:
    """Prepare, check, profile and compare one case (collective); the record on every rank.
    ``directory`` (seen by every rank) holds the zarr stores of the data rows."""
    from .operators import prepare

    p = prepare(case, directory)
    record = _run_prepared(p, args, trace_path)
    if p.close is not None:  # not on an error: that rank aborts the job (no collective here)
        p.close()
    return record


def _run_prepared(p: Any, args: argparse.Namespace, trace_path: str | None) -> dict[str, Any]:
    import blasmp_array as bm

    from .compare import run_baselines
    from .door_peers import measure_door_peers
    from .mpi_baselines import MPI_BASELINES
    from .operators import (
        DATA_OPERATORS,
        REDUCTION_OPERATORS,
        byte_count,
        flop_count,
        snapshot_in_place,
    )
    from .timing import time_collective

    case, grid = p.case, p.grid
    cleanup = p.cleanup or (lambda: None)
    in_place = case.op in ("trmm", "trsm")
    restore = snapshot_in_place(p) if in_place else (lambda: None)
    if p.door is not None:  # a data row's last result (up to a matrix) is freed untimed

        def restore() -> None:
            p.result = None

    record: dict[str, Any] = {
        "op": case.op,
        "dtype": case.dtype,
        "m": case.m,
        "n": case.n,
        "k": case.k,
        "block": list(case.block),
        "grid": [grid.nprow, grid.npcol],
        "num_stages": case.num_stages,
        "ranks": grid.size,
        "backend": grid.backend.name,
        "side": case.side,
        "lower": case.lower,
        "trans": case.trans,
        "flops": flop_count(case),
        "bytes": byte_count(case),
        "data_op": case.op in DATA_OPERATORS + REDUCTION_OPERATORS,
        "notes": list(p.notes),
        "check": None,
        "profile": None,
        "compare": None,
    }
    # first call: also the check's result
    restore()
    p.run()
    grid.backend.synchronize()
    if args.check:
        record["check"] = _check(p)
    cleanup()
    if case.op == "to_zarr":  # how our store was cut and encoded (the peers copy it)
        layout = p.door.store.get("layout") or {}
        written = grid.backend.bcast(layout.get("description"), root=0)
        record["notes"].append(f"store written by A.to_zarr: {written}")
    if args.profile:
        prof = time_collective(
            p.run, grid.backend, args.warmup, args.repeat, before=restore, after=p.cleanup
        )
        med = prof["median_s"]
        if record["data_op"]:
            prof["gbytes_per_s"] = record["bytes"] / med / 1e9 if med > 0 else None
        else:
            total = record["flops"] / med / 1e9 if med > 0 else None
            prof["gflops_total"] = total
            prof["gflops_per_rank"] = total / grid.size if total is not None else None
        record["profile"] = prof
    if trace_path is not None:
        restore()
        with bm.trace(trace_path):
            p.run()
            grid.backend.synchronize()
        cleanup()
        record["trace"] = trace_path
    if args.compare and p.door is not None:
        threads = args.compare_threads or grid.size
        record["compare"] = measure_door_peers(
            p, p.door, threads, args.warmup, args.repeat, tuple(args.baselines)
        )
    elif args.compare:
        restore()  # the operands as they were before the calls
        gathered: dict[str, Any] | None = {
            name: x.to_numpy(root=0)
            for name, x in p.inputs.items()
            if isinstance(x, bm.BlockCyclicArray)
        }
        ours = None
        if args.check and isinstance(p.result, bm.BlockCyclicArray):
            if set(args.baselines) & set(MPI_BASELINES):
                ours = p.result.to_numpy(root=0)
        if grid.rank != 0:
            gathered = None
        threads = args.compare_threads or grid.size
        record["compare"] = run_baselines(
            case,
            gathered,
            grid.comm,
            threads,
            args.warmup,
            args.repeat,
            record["flops"],
            which=tuple(args.baselines),
            prepared=p,
            ours=ours,
            check=args.check,
        )
    return record


def _check(p: Any) -> dict[str, Any]:
    from .operators import check_result

    return check_result(p)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m blasmp_array.bench`` and ``blasmp-bench``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    from .compare import BASELINES

    args.baselines = [b.strip() for b in args.baselines.split(",") if b.strip()]
    unknown = sorted(set(args.baselines) - set(BASELINES))
    if unknown:
        parser.error(f"unknown --baselines {unknown}; choose from {', '.join(BASELINES)}")
    if not (args.check or args.profile):
        args.profile = True

    from mpi4py import MPI

    import blasmp_array as bm

    from . import report
    from .door import STORE_ROWS, StoreDir

    nranks = MPI.COMM_WORLD.Get_size()
    cases = _cases(args, nranks)
    _check_cases(cases, nranks)
    rank = MPI.COMM_WORLD.Get_rank()
    world = bm.ProcessGrid(backend=args.backend)
    stores = None
    if any(c.op in STORE_ROWS for c in cases):
        stores = StoreDir(world.backend, args.dir)
    bar = report.progress(len(cases), enabled=rank == 0 and args.sweep and not args.quiet)
    results = []
    for i, case in enumerate(cases):
        trace_path = args.trace
        if trace_path and len(cases) > 1:
            stem = Path(trace_path)
            trace_path = str(stem.with_name(f"{stem.stem}.{i}{stem.suffix}"))
        results.append(run_case(case, args, trace_path, stores.path if stores else None))
        bar.advance(case.label())
    bar.close()
    if stores is not None:
        stores.remove()
    env = report.environment(world, argv)
    payload = {"schema": 1, "environment": env, "results": results}
    failed = [r for r in results if r["check"] is not None and not r["check"]["passed"]]
    if rank == 0:
        if not args.quiet:
            report.print_table(results, env, f"blasmp_array bench: {', '.join(args.op)}")
        if args.json:
            report.write_json(args.json, payload)
        if args.csv:
            report.write_csv(args.csv, results)
        if args.plot:
            why = report.plot(args.plot, results, env)
            if why:
                print(f"note: {why}")
        for r in failed:
            print(
                f"CHECK FAILED: {r['op']} {r['m']}x{r['n']}x{r['k']} grid {r['grid']}: "
                f"{r['check']}",
                file=sys.stderr,
            )
    return 1 if failed else 0
