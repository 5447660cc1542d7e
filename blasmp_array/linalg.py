"""Public linalg namespace (stub: being written)."""
