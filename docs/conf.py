"""Sphinx configuration of the blasmp_array documentation (builds offline).

Build: ``pip install -e ".[docs]"`` then ``sphinx-build -W -b html docs docs/_build/html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

project = "blasmp_array"
author = "the blasmp_array developers"
copyright = "the blasmp_array developers, BSD-3-Clause"  # noqa: A001

try:
    from blasmp_array import __version__ as release
except Exception:  # noqa: BLE001 - the API pages then fail loudly on their own
    release = "unknown"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # numpydoc-style sections
    "sphinx.ext.viewcode",
    "myst_parser",  # Markdown pages
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# gpu-node.md (written with the GPU backend) is included into gpu.md when it exists;
# _scripts holds the figure generator
exclude_patterns = ["_build", "_scripts", "_measurements", "gpu-node.md", "Thumbs.db", ".DS_Store"]

myst_heading_anchors = 3
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# GPU-only dependencies are never needed to document the API
autodoc_mock_imports = ["cupy", "cupyx", "nvshmem", "nvmath", "cuda"]

html_theme = "alabaster"
html_static_path = ["_static"]
html_title = f"blasmp_array {release}"

GPU_NODE_MARKER = "<!-- gpu-node.md is included here when present -->"


def _include_gpu_node(app, docname, source):  # noqa: ANN001 - Sphinx event signature
    """Include docs/gpu-node.md into the GPU page if the file exists (it is written with the
    GPU backend); otherwise say that it is missing."""
    if docname != "gpu" or GPU_NODE_MARKER not in source[0]:
        return
    if (HERE / "gpu-node.md").exists():
        replacement = "```{include} gpu-node.md\n:heading-offset: 1\n```\n"
    else:
        replacement = (
            "*The node set-up guide (`docs/gpu-node.md`) is not in this checkout yet.*\n"
        )
    source[0] = source[0].replace(GPU_NODE_MARKER, replacement)


def setup(app):  # noqa: ANN001, ANN201
    app.connect("source-read", _include_gpu_node)
