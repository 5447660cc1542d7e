"""Distributed algorithms, written once against the backend interface (backends/base.py)."""
