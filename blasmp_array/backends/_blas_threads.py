"""BLAS threads per rank: the ranks of one node share its cores instead of each BLAS starting one
thread per core.

Why
---
OpenBLAS (and MKL) start one thread per core of the machine in every process. Under
``mpiexec -n 2`` on 2 cores that makes 4 BLAS threads on 2 cores, and the factorisations, whose
steps wait for each other, slow down by 7-17x (measured on a 2-core machine at n = 2048,
``docs/defaults.md``). So when a backend is created, each rank sets its BLAS thread count
(through threadpoolctl, process-wide) to its share of the cores it may use.

The rule
--------
``threads = max(1, len(cpus) // sharing)``: ``cpus`` is the set of CPUs this process may run on
(``os.sched_getaffinity``), ``sharing`` the number of ranks on the same node (an MPI
shared-memory split of the backend's communicator) whose CPU sets intersect it, this one
included. Ranks that the launcher pins to disjoint cores then use all of theirs; unpinned ranks
divide the node's cores equally. The remainder of an uneven division stays free (2 ranks on 3
cores: 1 thread each): every rank runs the same steps, so the slowest one sets the pace, and
the free core serves the backend's communication threads and MPI's progress. Ranks outside the
backend's communicator that the launcher reports on this node (``MPI_LOCALNRANKS`` of MPICH's
Hydra, ``OMPI_COMM_WORLD_LOCAL_SIZE`` of Open MPI) count as sharing, so a grid over a
sub-communicator does not oversubscribe the node either. With at most one rank per CPU, the
ranks of a node never run more BLAS threads than it has CPUs.

The user's choice wins
----------------------
In order: ``ProcessGrid(..., blas_threads=k)`` (applied by the grid, see :func:`set_threads`),
``$BLASMP_BLAS_THREADS=k``, then any of ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
``MKL_NUM_THREADS`` (the BLAS read these itself: the threads are then left alone). Threads set
with threadpoolctl after the first grid is created also win (the rule runs once per process,
when its first backend is created).

SciPy's LAPACK (``potrf``, ``getrf`` of the CPU backend) comes, in the wheels from PyPI, with
its own OpenBLAS, loaded only when SciPy is imported; threadpoolctl changes only libraries
already loaded. :func:`_load_scipy_blas` therefore loads that library (a shared-object load,
not the 0.2 s import of ``scipy.linalg``), so that its threads are set too and SciPy finds it
loaded.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any

__all__ = [
    "USER_VARIABLES",
    "SETTING_VARIABLE",
    "BlasThreads",
    "apply",
    "choose",
    "current",
    "parse_setting",
    "rule",
    "set_threads",
    "node_share",
]

#: environment variables that the BLAS libraries read themselves: when one is set, the user chose
USER_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: the library's own setting: a positive number of BLAS threads per rank
SETTING_VARIABLE = "BLASMP_BLAS_THREADS"
#: variables in which launchers report the number of their ranks on this node
LAUNCHER_LOCAL_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


@dataclass(frozen=True)
class BlasThreads:
    """What was decided for this process's BLAS threads.

    Attributes
    ----------
    threads : int or None
        BLAS threads per rank set by the library, or None when it left them alone (the BLAS
        follows one of :data:`USER_VARIABLES`).
    source : str
        ``'rule'`` (cores divided by ranks on the node), ``'argument'`` (``blas_threads=`` of a
        grid), :data:`SETTING_VARIABLE`, or the name of the user variable that was set.
    cpus : int
        CPUs this process may run on.
    ranks_on_node : int
        Ranks on this node (of the backend's communicator, or as the launcher reports them).
    sharing : int
        Ranks on this node whose CPUs intersect this process's CPUs (this one included).
    """

    threads: int | None
    source: str
    cpus: int
    ranks_on_node: int
    sharing: int


_current: list[BlasThreads] = []


def current() -> BlasThreads | None:
    """The last decision applied in this process (None before any backend was created)."""
    return _current[-1] if _current else None


def rule(cpus: int, sharing: int) -> int:
    """BLAS threads of a rank that may use ``cpus`` CPUs shared by ``sharing`` ranks."""
    return max(1, int(cpus) // max(1, int(sharing)))


def parse_setting(value: Any, what: str, text: bool = False) -> int:
    """A positive thread count from ``value`` (an integer; with ``text``, the text of an
    environment variable); ``ValueError`` naming ``what`` otherwise."""
    k = 0
    if text and isinstance(value, str):
        digits = value.strip()
        k = int(digits) if digits.isdigit() else 0
    elif isinstance(value, Integral) and not isinstance(value, bool):
        k = int(value)
    if k < 1:
        raise ValueError(
            f"{what} must be a positive number of BLAS threads per rank, got {value!r}; "
            "leave it unset to give each rank its share of the node's cores"
        )
    return k


def choose(env: Mapping[str, str], cpus: int, sharing: int, ranks_on_node: int) -> BlasThreads:
    """The decision for one process from its environment and its share of the node (pure)."""
    setting = env.get(SETTING_VARIABLE, "").strip()
    if setting:
        k = parse_setting(setting, f"${SETTING_VARIABLE}", text=True)
        return BlasThreads(k, SETTING_VARIABLE, cpus, ranks_on_node, sharing)
    for name in USER_VARIABLES:
        if env.get(name, "").strip():
            return BlasThreads(None, name, cpus, ranks_on_node, sharing)
    return BlasThreads(rule(cpus, sharing), "rule", cpus, ranks_on_node, sharing)


def _cpus() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: every CPU of the machine
        return frozenset(range(os.cpu_count() or 1))


def _launcher_local_size(env: Mapping[str, str]) -> int:
    for name in LAUNCHER_LOCAL_SIZE:
        try:
            return max(1, int(env.get(name, "")))
        except ValueError:
            continue
    return 0


def share(comm: Any, env: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """``(cpus, sharing, ranks_on_node)`` of this process (collective over ``comm``)."""
    from mpi4py import MPI

    env = os.environ if env is None else env
    mine = _cpus()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        sets = node.allgather(mine)
    finally:
        node.Free()
    sharing = sum(1 for s in sets if s & mine)
    outside = max(0, _launcher_local_size(env) - len(sets))  # ranks of other communicators
    return len(mine), sharing + outside, len(sets) + outside


def _load_scipy_blas() -> None:
    """Load the BLAS that SciPy's wheel brings, if any, without importing SciPy."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return
    root = os.path.dirname(next(iter(spec.submodule_search_locations)))
    for path in sorted(glob.glob(os.path.join(root, "scipy.libs", "*openblas*.so*"))):
        try:
            ctypes.CDLL(path)
        except OSError:
            continue


def set_threads(k: int | None, decision: BlasThreads | None = None) -> None:
    """Set this process's BLAS threads to ``k`` (threadpoolctl, every BLAS loaded); None: leave
    them. Records ``decision`` (default: an explicit ``'argument'`` setting) for
    :func:`current`."""
    if k is not None:
        from threadpoolctl import threadpool_limits

        _load_scipy_blas()
        threadpool_limits(limits=int(k), user_api="blas")
    if decision is None:
        before = current()
        decision = BlasThreads(
            k,
            "argument",
            before.cpus if before else len(_cpus()),
            before.ranks_on_node if before else 1,
            before.sharing if before else 1,
        )
    _current.append(decision)


def apply(comm: Any) -> BlasThreads:
    """Decide and set this process's BLAS threads (collective over ``comm``, also when the user
    chose: every rank takes part in the same collectives). Only the first backend of a process
    sets them; later ones (another communicator, the other backend) keep what is set, which may
    be the user's own choice made in between. A bad ``$BLASMP_BLAS_THREADS`` on any rank raises
    the same ``ValueError`` on every rank."""
    cpus, sharing, on_node = share(comm)
    try:
        decision: BlasThreads | str = choose(os.environ, cpus, sharing, on_node)
    except ValueError as exc:
        decision = str(exc)
    errors = [(r, e) for r, e in enumerate(comm.allgather(decision)) if isinstance(e, str)]
    if errors:
        rank, text = errors[0]
        raise ValueError(f"rank {rank}: {text}")
    assert isinstance(decision, BlasThreads)
    before = current()
    if before is not None:
        return before
    set_threads(decision.threads, decision)
    return decision


def node_share(ranks_on_node: int) -> Any:
    """A context in which this process's BLAS uses the threads of every rank of its node (its
    own count times ``ranks_on_node``, at most the CPUs it may run on), restored on exit: for a
    call that one rank makes while the others of its node wait idle
    (:meth:`HostCollectives.run_on_root`), so the node's cores stay busy and never
    oversubscribed."""
    from threadpoolctl import threadpool_info, threadpool_limits

    _load_scipy_blas()
    counts = [
        int(p.get("num_threads", 1)) for p in threadpool_info() if p.get("user_api") == "blas"
    ]
    own = min(counts) if counts else 1
    return threadpool_limits(
        limits=max(1, min(len(_cpus()), own * max(1, ranks_on_node))), user_api="blas"
    )
