"""Progress bars on rank 0 for long collective constructions and I/O (tqdm or rich when
installed, else nothing); a bottom-layer module so that every layer may show one."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["progress_bar"]


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(enabled: bool, rank: int, total: int, desc: str, unit: str = "tile") -> Any:
    """A progress bar (``update(n)``, ``close()``) on rank 0 when stdout is a terminal.

    Uses tqdm or rich when installed; otherwise (and on other ranks) a no-op.
    """
    if not (enabled and rank == 0 and sys.stdout.isatty()):
        return _NoBar()
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit)
    except ImportError:
        pass
    try:
        from rich.progress import Progress

        progress = Progress()
        task = progress.add_task(desc, total=total)
        progress.start()

        class _RichBar:
            def update(self, n: int = 1) -> None:
                progress.update(task, advance=n)

            def close(self) -> None:
                progress.stop()

        return _RichBar()
    except ImportError:
        return _NoBar()
