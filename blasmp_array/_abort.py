"""End the whole MPI job when one rank dies of an uncaught exception.

Without this, an exception on one rank leaves the others blocked forever in their next
collective. :func:`install` chains ``sys.excepthook`` and ``threading.excepthook`` with a hook
that prints the traceback prefixed with the rank and calls ``MPI.COMM_WORLD.Abort(1)`` when the
job has more than one process (what ``python -m mpi4py`` does). Set ``BLASMP_NO_ABORT=1`` to
keep the default hooks.
"""

from __future__ import annotations

import sys
import threading
import traceback
from types import TracebackType
from typing import Any

__all__ = ["install", "installed"]

_installed = False


def installed() -> bool:
    """True once :func:`install` has replaced the hooks."""
    return _installed


def _abort(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None, where: str
) -> None:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write(
        f"[blasmp_array] uncaught exception on rank {rank} of {size} ({where}):\n{text}"
    )
    sys.stderr.flush()
    if size > 1 and not issubclass(exc_type, KeyboardInterrupt | SystemExit):
        sys.stderr.write(f"[blasmp_array] rank {rank}: aborting the MPI job (MPI_Abort)\n")
        sys.stderr.flush()
        world.Abort(1)


def install() -> None:
    """Abort the MPI job on an uncaught exception in any thread (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous_sys = sys.excepthook
    previous_thread = threading.excepthook

    def sys_hook(exc_type: Any, exc: Any, tb: Any) -> None:
        if issubclass(exc_type, KeyboardInterrupt | SystemExit):
            previous_sys(exc_type, exc, tb)
            return
        _abort(exc_type, exc, tb, "main thread")

    def thread_hook(args: Any) -> None:
        if args.exc_type is SystemExit:
            previous_thread(args)
            return
        name = args.thread.name if args.thread is not None else "?"
        _abort(args.exc_type, args.exc_value, args.exc_traceback, f"thread {name}")

    sys.excepthook = sys_hook
    threading.excepthook = thread_hook
