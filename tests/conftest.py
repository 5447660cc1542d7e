"""Top-level pytest configuration.

``tests/mpi`` holds the distributed tests: they are not collected by the single pytest process
but launched by ``tests/test_mpi.py`` under ``mpiexec -n N`` for several N (each rank runs pytest
on the same files in the same order, so their collectives match).
"""

import os

collect_ignore = [] if os.environ.get("BLASMP_UNDER_MPIEXEC") else ["mpi"]
