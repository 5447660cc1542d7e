"""CUDA settings the GPU backend needs before the process's first CUDA call.

Lazy module loading (CUDA's default on Linux since 12.2) loads a library kernel at its first
launch, and loading a module waits for the whole device. A cuBLAS kernel launched for the first
time in the middle of a pipeline then blocks the host until every wait its streams hold has been
released: the rank stops enqueueing (overlap is lost), and a wait whose release depends on this
host's later work never ends (CUDA Programming Guide, "Lazy Loading", potential hazards; it hung
a GPU test here). The backend
therefore asks for eager loading, ``CUDA_MODULE_LOADING=EAGER``, before CUDA initialises (an
explicit setting of the variable is respected), and warns when the process already runs with
lazy loading. CuPy's own element-wise kernels are compiled at first use whatever the mode; the
operators load them before a pipeline starts (``ops/engine/_warmup.py``).

Measured on the H200 node: cuBLAS still loads some kernels at their first launch with
``EAGER`` (a first 64x64 DGEMM enqueued behind a pending wait blocked the host until the wait was
released). The warm-up runs each BLAS routine once on small operands, but a routine met at a new
size may pick a kernel not loaded yet; the host then waits until this rank's streams drain. The
signals those streams wait for come from work the peers enqueued before, so this costs overlap
once rather than deadlocking; the GPU suite, the race tests and the benchmarks run with it.
"""

from __future__ import annotations

import os
import warnings


def prefer_eager_loading() -> None:
    """Ask for eager module loading unless the user chose a mode (call before CUDA starts)."""
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device (asks for eager loading first)."""
    prefer_eager_loading()
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:
        return False


def module_loading_mode() -> str | None:
    """``'EAGER'`` or ``'LAZY'`` as the driver reports it, or None where it cannot be asked."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    try:
        err, mode = driver.cuModuleGetLoadingMode()
    except Exception:  # noqa: BLE001 - an old driver binding: unknown
        return None
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    return "LAZY" if mode == driver.CUmoduleLoadingMode.CU_MODULE_LAZY_LOADING else "EAGER"


def warn_if_lazy() -> None:
    """Warn when CUDA runs with lazy module loading (see the module docstring)."""
    if module_loading_mode() == "LAZY":
        warnings.warn(
            "CUDA runs with lazy module loading: a library kernel loaded for the first time "
            "inside a distributed pipeline blocks the host until the streams' signal waits are "
            "released, which can stall or hang the ranks. Set "
            "CUDA_MODULE_LOADING=EAGER before the process first uses CUDA (blasmp_array sets it "
            "when it is the first to start CUDA and the variable is unset).",
            RuntimeWarning,
            stacklevel=3,
        )
