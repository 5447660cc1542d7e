"""The distributed BLAS3 operators: GEMM, SYMM, SYRK, SYR2K, TRMM, TRSM and ``matmul``.

Imports: this floor and ``ops.engine`` (never LAPACK or the NumPy face).
"""
