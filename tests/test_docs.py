"""The README's promises that tooling relies on: the set-up block .ci/run reads, runnable code
examples, and a docs tree whose table of contents points at existing pages."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_setup_block_has_exactly_install_and_test() -> None:
    setup = [b for b in code_blocks(README, "bash") if "# install" in b]
    assert len(setup) == 1, "README needs one bash block with the '# install' command"
    lines = [line for line in setup[0].splitlines() if line.strip()]
    commands = [re.sub(r"\s+#.*$", "", line) for line in lines]
    assert commands == ['pip install -e ".[mpich,test]"', "pytest"]


def test_ci_reads_the_readme_commands() -> None:
    # .ci/run extracts the commands with this grep/sed pair; keep them in sync with the README
    script = (ROOT / ".ci" / "run").read_text()
    assert "readme_command install" in script
    assert "readme_command 'run the test suite'" in script
    for key, expected in (
        ("install", 'pip install -e ".[mpich,test]"'),
        ("run the test suite", "pytest"),
    ):
        out = subprocess.run(
            [
                "bash",
                "-c",
                f"grep -E '^[^#].*#[[:space:]]*{key}\\b' README.md | head -n 1 "
                "| sed -E 's/[[:space:]]+#.*$//'",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert out == expected


def test_readme_and_quickstart_python_compiles() -> None:
    for path in (ROOT / "README.md", ROOT / "docs" / "quickstart.md"):
        for i, block in enumerate(code_blocks(path.read_text(), "python")):
            compile(block, f"{path.name}[{i}]", "exec")


def test_docs_toctree_pages_exist() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    (toc,) = re.findall(r"```\{toctree\}\n(.*?)```", index, flags=re.S)
    pages = [line.strip() for line in toc.splitlines() if line.strip() and not line.startswith(":")]
    assert pages
    for page in pages:
        assert any((ROOT / "docs" / f"{page}{ext}").exists() for ext in (".md", ".rst")), page


def test_layout_figure_committed() -> None:
    png = ROOT / "docs" / "_static" / "layout_2x3.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
