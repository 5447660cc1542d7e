"""The distributed factorizations and their drivers: Cholesky, LU, QR (Householder and
CholeskyQR), the symmetric eigensolver and the SVD with their reductions, and the linear solves.

Imports: this floor, ``ops.blas3`` and ``ops.engine`` (never the NumPy face).
"""
