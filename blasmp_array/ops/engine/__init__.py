"""The bottom floor of the operators: the exchange and array plumbing every operator uses.

The one-sided exchange engine and its plans (``_exchange``, ``_messages``), the SUMMA panel
pipeline (``panels``), redistribution (``redistribute``, ``row_panels``), triangles, the kernel
warm-up, the local factorization of a block (``_factor_block``), replicated operands and vectors,
the collective input checks (``_checks``), and the array's windows, assignment and elementwise
arithmetic (``indexing``, ``elementwise``, ``selection``). Those three sit here, not in the
NumPy face, because the factorizations below the face (``lapack._householder``,
``lapack._band_reduction``) and the checks read and write windows of an array.

Imports: only this floor and the layers below ``ops`` (array, creation, layout, ...). The one
way up is at run time: ``_warmup.begin_pipeline`` imports every module of ``ops`` by name
(``importlib``) so that their kernel warm-up samples are registered.
"""
