"""Construction of BlockCyclicArrays: from NumPy, constants, identity; and gathering back.
(stub: being written)"""
def _todo(*a, **k):
    raise NotImplementedError
from_numpy = gather = zeros = ones = empty = eye = full = zeros_like = ones_like = empty_like = full_like = _todo
