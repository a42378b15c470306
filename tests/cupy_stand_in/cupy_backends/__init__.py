"""Stand-in for ``cupy_backends`` (see ``cupy``'s stand-in): CuPy's thin cuBLAS wrappers."""
