"""Stand-in for ``cupyx.scipy``: only ``sparse``."""
