"""``python -m blasmp_array.bench`` (also the ``blasmp-bench`` console script)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
