"""The tuning tools that ``tools/gpu-perf.sh`` runs on the GPU node (``tools/*_sweep.py``) run on
the CPU backend with the very options the script passes them, at small sizes: a tool that no
longer accepts its phase's arguments would otherwise fail only on the node, in its time."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: tool -> the size options replaced by small ones (the rest of the phase's options are kept)
SMALL = {
    "getrf_panel_sweep.py": {"--n": ["96"], "--repeat": ["1"]},
    "geqrf_panel_sweep.py": {"--n": ["96"], "--repeat": ["1"]},
    "cholqr_sweep.py": {"--m": ["4096"], "--n": ["16"], "--repeat": ["1"]},
    "defaults_table.py": {"--n": ["128"], "--repeat": ["1"]},
    "factor_block_sweep.py": {"--n": ["128"], "--repeat": ["1"]},
}


def phase_arguments(tool: str) -> list[str]:
    """The arguments ``tools/gpu-perf.sh`` passes to ``tool`` (its one invocation there)."""
    text = (ROOT / "tools" / "gpu-perf.sh").read_text().replace("\\\n", " ")
    found = re.findall(rf'"\$node_run" \S+ python3 tools/{re.escape(tool)}(.*?)(?:>|;;)', text)
    assert len(found) == 1, f"tools/gpu-perf.sh runs {tool} {len(found)} times"
    return shlex.split(found[0])


def small(tool: str, args: list[str]) -> list[str]:
    """``args`` with the sizes of :data:`SMALL`: the shell variables of the script become
    their small values, and the panel widths stay (they are what the phase tunes), capped so
    that the small matrix still has several panels."""
    out: list[str] = []
    option = None
    for a in args:
        if a.startswith("--"):
            option = a
            out.append(a)
            if a in SMALL[tool]:
                out += SMALL[tool][a]
            continue
        if option in SMALL[tool]:
            continue  # replaced
        if a.startswith("$"):
            raise AssertionError(f"{tool}: unexpected shell value {a} for {option}")
        if (
            option in ("--config", "--panel", "--q-block", "--blocks")
            and a.isdigit()
            and int(a) > 0
        ):
            a = str(min(int(a) // 32, 48) or 8)  # several panels of a 96 x 96 matrix
        elif option == "--config" and ":" in a:
            a = ":".join(
                str(min(int(x), 1024) // 64) if x.isdigit() and int(x) else x for x in a.split(":")
            )
        out.append(a)
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("tool", sorted(SMALL))
def test_sweep_tool_runs_with_its_phase_arguments(tool):
    args = small(tool, phase_arguments(tool))
    env = dict(os.environ, BLASMP_BACKEND="cpu", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, f"{tool} {args}: rc={done.returncode}\n{done.stderr[-3000:]}"
    lines = [line for line in done.stdout.splitlines() if re.search(r" m?s \[", line)]
    assert len(lines) >= 3, f"{tool} {args} printed no timings:\n{done.stdout}"
    assert "nan" not in done.stdout.lower()


#: the defaults of tools/gpu-perf.sh's shell variables
SHELL_VALUES = {
    "$n": "16384",
    "$nsmall": "4096",
    "$block": "2048",
    "$block4": "2048",
    "$repeat": "5",
    "$baselines": "cupy",
    "$face": "matmul,matmul_ata,solve_triangular,trsm,trmm,syr2k,symm",
}


def bench_phases() -> list[tuple[str, int, list[str]]]:
    """``(phase, ranks, bench arguments)`` of every ``bench`` call of tools/gpu-perf.sh."""
    text = (ROOT / "tools" / "gpu-perf.sh").read_text().replace("\\\n", " ")
    out = []
    for phase, ranks, rest in re.findall(r"\bbench (\w+) (\d) ([^\n;]*)", text):
        args = [SHELL_VALUES.get(a, a) for a in shlex.split(rest.replace('"', ""))]
        args = [a.replace("$out/", "/tmp/") for a in args]
        out.append((phase, int(ranks), args))
    return out


def test_gpu_perf_bench_phases_parse():
    """Every ``bench`` phase of tools/gpu-perf.sh names operators, options and baselines the
    bench knows, and grids that fit its rank count (parsed as the bench parses them)."""
    from blasmp_array.bench import cli
    from blasmp_array.bench.compare import BASELINES

    phases = bench_phases()
    assert len(phases) >= 20, f"found only {len(phases)} bench phases"
    for phase, ranks, args in phases:
        assert not any(a.startswith("$") for a in args), f"{phase}: unknown shell value in {args}"
        try:
            parsed = cli.build_parser().parse_args([*args, "--backend", "gpu"])
        except SystemExit as exc:  # argparse's error
            raise AssertionError(f"phase {phase}: the bench refuses {args}") from exc
        names = [b.strip() for b in parsed.baselines.split(",") if b.strip()]
        assert set(names) <= set(BASELINES), f"phase {phase}: baselines {names}"
        cli._check_cases(cli._cases(parsed, ranks), ranks)


def test_gpu_perf_checked_rows_are_timed():
    """A bench row that checks its result also times it: the bench times our calls only with
    ``--profile`` once ``--check`` is given, so a row with ``--check`` alone loses our times."""
    for phase, _, args in bench_phases():
        if "--check" in args:
            assert "--profile" in args, f"phase {phase}: --check without --profile"


def gpu_perf_phases() -> list[str]:
    """The phases tools/gpu-perf.sh lists in its usage (``#   phases: ...``)."""
    text = (ROOT / "tools" / "gpu-perf.sh").read_text()
    block = re.search(r"#   phases: (.*?)\n#\s+\(default", text, re.S)
    assert block, "tools/gpu-perf.sh lists no phases"
    return block.group(1).replace("#", " ").split()


def test_gpu_perf_walks_every_phase(tmp_path):
    """Every phase of tools/gpu-perf.sh runs to its end through a stub launcher (``NODE_RUN``):
    no unbound shell variable (the script runs under ``set -u``), no unknown phase, and each
    phase launches at least one run."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "node-run-stub.sh"
    stub.write_text(f'#!/bin/bash\necho "$*" >> {calls}\n')
    stub.chmod(0o755)
    phases = gpu_perf_phases()
    assert len(phases) >= 30, phases
    for phase in phases:
        calls.write_text("")
        env = dict(os.environ, NODE_RUN=str(stub), OUT=str(tmp_path / "out" / phase))
        done = subprocess.run(
            ["bash", str(ROOT / "tools" / "gpu-perf.sh"), phase],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "unbound variable" not in done.stderr, f"{phase}: {done.stderr[-2000:]}"
        assert "unknown phase" not in done.stderr, f"{phase}: {done.stderr[-2000:]}"
        assert calls.read_text().strip(), f"phase {phase} launched nothing:\n{done.stderr[-2000:]}"
