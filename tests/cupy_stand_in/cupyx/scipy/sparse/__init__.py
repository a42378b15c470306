"""Stand-in for ``cupyx.scipy.sparse``: SciPy's sparse matrices. Their products come back as
NumPy arrays, which Sculler's sparse kernels add into device arrays or pass to
``cupy.asarray`` (the stand-in's), so they end on the stand-in device."""

from scipy.sparse import csc_matrix, csr_matrix

__all__ = ["csc_matrix", "csr_matrix"]
