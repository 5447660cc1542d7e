"""Warning classes of blasmp_array.

Every warning about data that moves behind the user's back (an operand redistributed to match
another, a submatrix copied because its offset is not on a block boundary) derives from
:class:`RedistributionWarning`, so one filter silences or escalates them all::

    warnings.simplefilter("error", bm.RedistributionWarning)
"""

from __future__ import annotations

__all__ = ["RedistributionWarning", "ViewCopyWarning"]


class RedistributionWarning(UserWarning):
    """Data was redistributed (an all-to-all exchange) to match a layout an operation needs."""


class ViewCopyWarning(RedistributionWarning):
    """``A[i0:i1, j0:j1]`` was copied instead of viewed: its offset is not on a block boundary.

    The copy does not share storage with ``A``: writing into it does not change ``A`` (write
    into ``A`` with ``A[i0:i1, j0:j1] = value`` instead).
    """
