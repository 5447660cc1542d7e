"""Warning classes of blasmp_array.

Every warning about data that moves behind the user's back (an operand redistributed to match
another, a submatrix copied because its offset is not on a block boundary) derives from
:class:`RedistributionWarning`, so one filter silences or escalates them all::

    warnings.simplefilter("error", bm.RedistributionWarning)
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

__all__ = ["RedistributionWarning", "ViewCopyWarning", "user_stacklevel"]


class RedistributionWarning(UserWarning):
    """Data was redistributed (an all-to-all exchange) to match a layout an operation needs."""


class ViewCopyWarning(RedistributionWarning):
    """``A[i0:i1, j0:j1]`` was copied instead of viewed: its offset is not on a block boundary.

    The copy does not share storage with ``A``: writing into it does not change ``A`` (write
    into ``A`` with ``A[i0:i1, j0:j1] = value`` instead).
    """


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside blasmp_array and NumPy's wrappers (for
    :func:`warnings.warn` called by the caller of this function)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    npdir = os.path.dirname(os.path.abspath(np.__file__))
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None:
        fname = os.path.abspath(frame.f_code.co_filename)
        if not (fname.startswith(pkg + os.sep) or fname.startswith(npdir + os.sep)):
            return level
        frame, level = frame.f_back, level + 1
    return 1
