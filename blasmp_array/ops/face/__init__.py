"""The NumPy face of the operators: NumPy functions, products, reductions, scans and ranges,
the matrix functions of the singular values (``spectral``) and the registration of the array's
methods (``_methods``).

``spectral`` (``np.linalg.norm`` orders 2/-2/'nuc', ``cond``, ``matrix_rank``, ``pinv``,
``lstsq``) sits here rather than with the SVD in ``ops.lapack``: it wraps the ``np.linalg.norm``
that ``reductions`` registers, so it imports ``reductions``.

Imports: any floor of ``ops``.
"""
