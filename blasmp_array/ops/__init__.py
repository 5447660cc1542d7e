"""Distributed algorithms, written once against the backend interface (backends/base.py).

Four floors, each a subpackage importing only itself and the floors below it (from the top):
``face`` (the NumPy face), ``lapack`` (factorizations and solves), ``blas3`` and ``engine``
(the exchange and array plumbing). ``blasmp_array/__init__.py`` imports ``face._methods``,
which imports every module that registers into ``_dispatch``.
"""
