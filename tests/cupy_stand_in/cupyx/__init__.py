"""Stand-in for ``cupyx`` (see ``cupy``'s stand-in): only ``cupyx.scipy.sparse``."""
