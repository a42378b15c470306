"""Live training curves (``paddle.v2.plot``).

``Ploter`` collects ``(step, value)`` points per curve title and draws them all on one
figure: inline in a Jupyter notebook, or into a PNG file from a script. matplotlib is the
optional extra ``plot`` and is imported only when a figure is drawn; the figure is
rendered with the Agg canvas directly, so the global pyplot backend is never touched.
Set the environment variable ``DISABLE_PLOT=True`` to turn :meth:`Ploter.plot` into a
no-op (e.g. when a notebook runs as a test script).

Example:
    >>> p = Ploter("train cost", "test cost")
    >>> p.append("train cost", 0, 1.5)
    >>> p.plot("curves.png")  # doctest: +SKIP
"""

from __future__ import annotations

import io
import os
import sys
import warnings
from typing import Any

from sculler.fileio import atomic_write

__all__ = ["PlotData", "Ploter"]


class PlotData:
    """The points of one curve."""

    def __init__(self) -> None:
        self.step: list[float] = []
        self.value: list[float] = []

    def append(self, step: float, value: float) -> None:
        self.step.append(step)
        self.value.append(value)

    def reset(self) -> None:
        self.step = []
        self.value = []


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython already imported and running a kernel)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _figure_class() -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "sculler.plot.Ploter needs matplotlib; install it with `pip install sculler[plot]`"
        ) from exc
    return Figure, FigureCanvasAgg


class Ploter:
    """Collects points of the named curves and plots them together.

    Args:
        titles: the curve names; :meth:`append` accepts only these.
    """

    def __init__(self, *titles: str) -> None:
        for t in titles:
            if not isinstance(t, str):
                raise TypeError(f"Ploter titles must be str, got {t!r}")
        self.titles = titles
        self.data: dict[str, PlotData] = {t: PlotData() for t in titles}
        self._warned = False

    @staticmethod
    def _disabled() -> bool:
        return os.environ.get("DISABLE_PLOT") == "True"

    def append(self, title: str, step: float, value: float) -> None:
        """Add the point ``(step, value)`` to curve ``title``."""
        if title not in self.data:
            raise ValueError(f"unknown curve {title!r}; this Ploter has {list(self.titles)}")
        self.data[title].append(step, value)

    def plot(self, path: str | os.PathLike | None = None) -> None:
        """Draw every non-empty curve: to a PNG at ``path``, or inline in a notebook.

        Outside a notebook with no ``path`` there is nowhere to draw: a warning says so.
        """
        if self._disabled():
            return
        if path is None and not _in_notebook():
            if not self._warned:
                warnings.warn(
                    "Ploter.plot() outside a notebook needs a path to save the PNG to",
                    stacklevel=2,
                )
                self._warned = True
            return
        figure_cls, canvas_cls = _figure_class()
        fig = figure_cls()
        canvas_cls(fig)
        ax = fig.add_subplot()
        shown = [t for t in self.titles if self.data[t].step]
        for t in shown:
            ax.plot(self.data[t].step, self.data[t].value, label=t)
        if shown:
            ax.legend(loc="upper left")
        if path is not None:
            atomic_write(path, lambda stream: fig.savefig(stream, format="png"), "Ploter.plot")
            return
        from IPython import display

        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        display.clear_output(wait=True)
        display.display(display.Image(data=buf.getvalue()))

    def reset(self) -> None:
        """Drop all points of all curves (titles are kept)."""
        for d in self.data.values():
            d.reset()
