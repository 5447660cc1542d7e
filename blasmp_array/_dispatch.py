"""NumPy protocol registry (stub: being written)."""
def array_function(func, types, args, kwargs):
    return NotImplemented
def array_ufunc(ufunc, method, inputs, kwargs):
    return NotImplemented
