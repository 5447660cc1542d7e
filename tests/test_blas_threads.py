"""The BLAS-threads rule (``backends/_blas_threads.py``): each rank gets its share of its node's
cores unless the user chose, and ranks never run more BLAS threads than their node has CPUs.

The rule itself is a pure function (tested directly); the launcher tests run small scripts under
``mpiexec`` WITHOUT the thread variables that ``tests/test_mpi.py`` sets for the suite, and read
the thread counts with threadpoolctl in each rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blasmp_array.backends import _blas_threads as bt

ROOT = Path(__file__).resolve().parent.parent
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
THREAD_VARIABLES = (*bt.USER_VARIABLES, bt.SETTING_VARIABLE)


# -- the rule (pure) ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cpus", "sharing", "threads"),
    [(2, 1, 2), (2, 2, 1), (3, 2, 1), (8, 3, 2), (16, 4, 4), (1, 4, 1), (2, 3, 1), (64, 1, 64)],
)
def test_rule_divides_the_cpus(cpus: int, sharing: int, threads: int) -> None:
    assert bt.rule(cpus, sharing) == threads
    if sharing <= cpus:  # as many ranks as CPUs or fewer: never oversubscribed
        assert sharing * bt.rule(cpus, sharing) <= cpus


def test_choose_without_variables_applies_the_rule() -> None:
    d = bt.choose({}, cpus=8, sharing=4, ranks_on_node=4)
    assert (d.threads, d.source) == (2, "rule")


@pytest.mark.parametrize("name", bt.USER_VARIABLES)
def test_choose_leaves_a_user_variable_alone(name: str) -> None:
    d = bt.choose({name: "3"}, cpus=8, sharing=4, ranks_on_node=4)
    assert (d.threads, d.source) == (None, name)


def test_choose_setting_variable_wins_over_the_others() -> None:
    env = {bt.SETTING_VARIABLE: "5", "OMP_NUM_THREADS": "1"}
    d = bt.choose(env, cpus=8, sharing=4, ranks_on_node=4)
    assert (d.threads, d.source) == (5, bt.SETTING_VARIABLE)


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", " "])
def test_bad_setting_variable_raises(bad: str) -> None:
    if not bad.strip():  # blank counts as unset
        assert bt.choose({bt.SETTING_VARIABLE: bad}, 2, 1, 1).source == "rule"
        return
    with pytest.raises(ValueError, match=bt.SETTING_VARIABLE):
        bt.choose({bt.SETTING_VARIABLE: bad}, 2, 1, 1)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3", None])
def test_bad_grid_argument_raises(bad: object) -> None:
    with pytest.raises(ValueError, match="blas_threads"):
        bt.parse_setting(bad, "blas_threads")


def test_import_does_not_set_threads() -> None:
    """The rule runs when a backend is created, not at import."""
    code = (
        "import blasmp_array\n"
        "from blasmp_array.backends import _blas_threads\n"
        "assert _blas_threads.current() is None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=_clean_env())


# -- under mpiexec, without the thread variables --------------------------------------------------
_PROBE = """
import json, os, sys
import blasmp_array as bm
from mpi4py import MPI
kw = json.loads(sys.argv[1])
comm = MPI.COMM_SELF if kw.pop("self", False) else MPI.COMM_WORLD
grid = bm.ProcessGrid(comm=comm, backend="cpu", **kw)
import scipy.linalg  # SciPy's own BLAS, loaded after the grid: its threads must be set too
from threadpoolctl import threadpool_info
libs = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
d = bm.backends._blas_threads.current()
cfg = bm.show_config(grid, mode="dicts")
out = dict(libs=libs, threads=d.threads, source=d.source, cpus=d.cpus, sharing=d.sharing,
           shown=[r["blas_threads"] for r in cfg["per_rank"]],
           shown_libs=[[b["num_threads"] for b in r["blas"]] for r in cfg["per_rank"]])
everyone = MPI.COMM_WORLD.gather(out)
if MPI.COMM_WORLD.rank == 0:
    print("RESULT " + json.dumps(everyone))
"""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.pop("BLASMP_UNDER_MPIEXEC", None)
    env.update(BLASMP_BACKEND="cpu", PYTHONUNBUFFERED="1", **extra)
    return env


def _run(nprocs: int, env: dict[str, str], **grid_kwargs: object) -> list[dict]:
    from test_mpi import mpiexec

    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-c", _PROBE, json.dumps(grid_kwargs)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _libs(r: dict) -> set[int]:
    assert r["libs"], "threadpoolctl found no BLAS"
    return set(r["libs"])


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_default_gives_each_rank_its_share(nprocs: int) -> None:
    ranks = _run(nprocs, _clean_env())
    want = max(1, CPUS // nprocs)
    for r in ranks:
        assert (r["threads"], r["source"], r["cpus"], r["sharing"]) == (want, "rule", CPUS, nprocs)
        assert _libs(r) == {want}, r  # NumPy's and SciPy's BLAS alike
    # ranks never run more BLAS threads than the node has CPUs (unless they outnumber them)
    assert sum(max(_libs(r)) for r in ranks) <= max(CPUS, nprocs)
    # show_config reports what threadpoolctl sees
    assert ranks[0]["shown"] == [want] * nprocs
    assert all(set(libs) == {want} for libs in ranks[0]["shown_libs"])


@pytest.mark.mpi
def test_sub_communicator_counts_the_launchers_ranks() -> None:
    """A grid over COMM_SELF still shares the node with the job's other rank."""
    ranks = _run(2, _clean_env(), self=True)
    for r in ranks:
        assert r["threads"] == max(1, CPUS // 2)
        assert _libs(r) == {max(1, CPUS // 2)}


needs_two_cpus = pytest.mark.skipif(CPUS < 2, reason="the rule gives 1 thread on 1 CPU anyway")


@pytest.mark.mpi
@needs_two_cpus
@pytest.mark.parametrize("name", ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"])
def test_user_variable_wins(name: str) -> None:
    # one rank: the rule would give every CPU; the user asked for 1
    (r,) = _run(1, _clean_env(**{name: "1"}))
    assert (r["threads"], r["source"]) == (None, name)
    assert _libs(r) == {1}


@pytest.mark.mpi
@needs_two_cpus
def test_mkl_variable_leaves_the_threads_alone() -> None:
    """MKL_NUM_THREADS is the user's choice for MKL; an OpenBLAS keeps its own default then."""
    (r,) = _run(1, _clean_env(MKL_NUM_THREADS="1"))
    assert (r["threads"], r["source"]) == (None, "MKL_NUM_THREADS")


@pytest.mark.mpi
@needs_two_cpus
def test_setting_variable_wins() -> None:
    (r,) = _run(1, _clean_env(**{bt.SETTING_VARIABLE: "1", "OMP_NUM_THREADS": "2"}))
    assert (r["threads"], r["source"]) == (1, bt.SETTING_VARIABLE)
    assert _libs(r) == {1}


@pytest.mark.mpi
@needs_two_cpus
def test_grid_argument_wins() -> None:
    ranks = _run(2, _clean_env(**{bt.SETTING_VARIABLE: "1"}), blas_threads=2)
    for r in ranks:
        assert (r["threads"], r["source"]) == (2, "argument")
        assert _libs(r) == {2}


@pytest.mark.mpi
def test_bad_setting_variable_fails_on_every_rank() -> None:
    from test_mpi import mpiexec

    env = _clean_env(**{bt.SETTING_VARIABLE: "lots"}, BLASMP_NO_ABORT="1")
    code = (
        "import blasmp_array as bm\n"
        "try:\n    bm.ProcessGrid(backend='cpu')\n"
        "except ValueError as e:\n    print('RAISED', e, flush=True)\n"
    )
    cmd = [mpiexec(), "-n", "2", sys.executable, "-c", code]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("RAISED") == 2 and "BLASMP_BLAS_THREADS" in proc.stdout


@pytest.mark.mpi
@needs_two_cpus
def test_later_backends_keep_the_threads() -> None:
    """Only a process's first backend applies the rule: a grid over another communicator
    keeps the threads chosen before (here by the first grid's argument)."""
    from test_mpi import mpiexec

    code = (
        "import blasmp_array as bm\n"
        "from mpi4py import MPI\n"
        "from threadpoolctl import threadpool_info\n"
        "bm.ProcessGrid(backend='cpu', blas_threads=1)\n"
        "g = bm.ProcessGrid(comm=MPI.COMM_WORLD.Dup(), backend='cpu')\n"
        "libs = {i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}\n"
        "print('THREADS', sorted(libs), g.backend.blas_threads.source, flush=True)\n"
    )
    cmd = [mpiexec(), "-n", "1", sys.executable, "-c", code]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "THREADS [1] argument" in proc.stdout, proc.stdout
