"""The check/profile command line (``python -m blasmp_array.bench``)."""
