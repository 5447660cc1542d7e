"""Host staging of a local matrix for the I/O paths, with the device copies beside the I/O.

Files and stores are written and read from host memory. On the CPU backend the local matrix
is host memory already: the I/O reads or fills it in place, with no staging at all (unless the
stored dtype differs, see :func:`read_into`). On the GPU backend the local matrix lives on the
device and moves through host *bands* -- whole local block rows, contiguous in the C-ordered
local matrix, of at most :data:`STAGING_BYTES` each -- copied with the backend's
``asnumpy``/``asarray`` (one large copy per band, never one per block). The device copy of one
band runs on the calling thread while a helper thread does the I/O of the band before it, so
at most two bands are on the host at any time.

The calling thread does every device copy (the backend's streams and current device belong to
it); the helper thread only runs the I/O callbacks, which touch host memory only.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ..layout import BlockCyclicLayout
from ._plan import bands

__all__ = ["STAGING_BYTES", "host_resident", "write_from", "read_into"]

#: Largest host band (bytes) of a device-resident local matrix: two bands at most are on the
#: host at once (one in I/O, one being copied).
STAGING_BYTES = 64 * 2**20


def host_resident(backend: Any) -> bool:
    """Whether the backend keeps local matrices in host (NumPy) memory."""
    return backend.xp is np


def write_from(
    backend: Any,
    local: Any,
    layout: BlockCyclicLayout,
    coords: tuple[int, int],
    sink: Callable[[np.ndarray, slice], None],
) -> None:
    """Give the local matrix to ``sink(host, rows)`` in host memory, band after band.

    ``host`` holds the local rows ``rows`` (all local columns). Host-resident local matrices
    make one call with the local matrix itself (no copy). Device-resident ones go through
    bands of at most :data:`STAGING_BYTES`: band ``k + 1`` is copied to the host here while
    ``sink`` writes band ``k`` on a helper thread.
    """
    ml = local.shape[0]
    if ml == 0 or local.shape[1] == 0:
        return
    if host_resident(backend):
        sink(local, slice(0, ml))
        return
    pending: Future[None] | None = None
    # leaving the pool waits for a band in flight, also when a copy failed
    with ThreadPoolExecutor(1, thread_name_prefix="blasmp-io") as helper:
        for rows in bands(layout, *coords, local.dtype.itemsize, STAGING_BYTES):
            host = backend.asnumpy(local[rows])  # device band -> host
            if pending is not None:
                pending.result()
            pending = helper.submit(sink, host, rows)
        if pending is not None:
            pending.result()


def read_into(
    backend: Any,
    local: Any,
    layout: BlockCyclicLayout,
    coords: tuple[int, int],
    source: Callable[[np.ndarray, slice], None],
    stored_dtype: np.dtype,
) -> None:
    """Fill the local matrix from ``source(host, rows)``, which fills the host array ``host``
    (dtype ``stored_dtype``) with the local rows ``rows`` (all local columns).

    A host-resident local matrix of dtype ``stored_dtype`` is filled in place (one call, no
    copy). Otherwise the rows go through host bands of at most :data:`STAGING_BYTES`: band
    ``k + 1`` is read on a helper thread while band ``k`` is converted to the local dtype and
    copied to the device here.
    """
    ml = local.shape[0]
    if ml == 0 or local.shape[1] == 0:
        return
    if host_resident(backend) and local.dtype == stored_dtype:
        source(local, slice(0, ml))
        return
    parts = bands(layout, *coords, max(local.dtype.itemsize, stored_dtype.itemsize), STAGING_BYTES)

    def fill(rows: slice) -> np.ndarray:
        host = np.empty((rows.stop - rows.start, local.shape[1]), dtype=stored_dtype)
        source(host, rows)
        return host

    with ThreadPoolExecutor(1, thread_name_prefix="blasmp-io") as helper:
        ahead = helper.submit(fill, parts[0])
        for k, rows in enumerate(parts):
            host = ahead.result()
            if k + 1 < len(parts):
                ahead = helper.submit(fill, parts[k + 1])
            local[rows] = backend.asarray(host)  # host band -> device (cast to the local dtype)
