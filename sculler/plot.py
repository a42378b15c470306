"""Training curves: ``Ploter`` (``paddle.v2.plot``) and ``TensorBoard`` event files.

``Ploter`` collects ``(step, value)`` points per curve title and draws them all on one
figure: inline in a Jupyter notebook, or into a PNG file from a script. matplotlib is the
optional extra ``plot`` and is imported only when a figure is drawn; the figure is
rendered with the Agg canvas directly, so the global pyplot backend is never touched.
Set the environment variable ``DISABLE_PLOT=True`` to turn :meth:`Ploter.plot` into a
no-op (e.g. when a notebook runs as a test script).

``TensorBoard(logdir)`` is an event handler that writes the cost and every metric per
iteration and per pass, and test results, as TensorBoard scalars (tensorboardX, the optional
extra ``tensorboard``); it also has ``Ploter``'s ``append(title, step, value)``. A write that
fails (disk full) raises an error naming the event file; it never hangs.

Example:
    >>> p = Ploter("train cost", "test cost")
    >>> p.append("train cost", 0, 1.5)
    >>> p.plot("curves.png")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

from sculler.fileio import atomic_write, raise_write_error

__all__ = ["PlotData", "Ploter", "TensorBoard"]


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
        xlabel, ylabel, title: the axis labels and the figure title.
    """

    def __init__(self, *titles: str, xlabel: str = "step", ylabel: str = "value",
                 title: str = "training curves") -> None:
        for t in titles:
            if not isinstance(t, str):
                raise TypeError(f"Ploter titles must be str, got {t!r}")
        self.titles = titles
        self.data: dict[str, PlotData] = {t: PlotData() for t in titles}
        self.xlabel, self.ylabel, self.title = xlabel, ylabel, title
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
        fig = self.figure()
        if path is not None:
            atomic_write(path, lambda stream: fig.savefig(stream, format="png"), "Ploter.plot")
            return
        from IPython import display

        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        display.clear_output(wait=True)
        display.display(display.Image(data=buf.getvalue()))

    def figure(self) -> Any:
        """A matplotlib Figure (Agg canvas) of the non-empty curves, with axis labels, a title
        and a legend."""
        figure_cls, canvas_cls = _figure_class()
        fig = figure_cls()
        canvas_cls(fig)
        ax = fig.add_subplot()
        shown = [t for t in self.titles if self.data[t].step]
        for t in shown:
            ax.plot(self.data[t].step, self.data[t].value, label=t)
        if shown:
            ax.legend(loc="upper left")
        ax.set_xlabel(self.xlabel)
        ax.set_ylabel(self.ylabel)
        ax.set_title(self.title)
        return fig

    def reset(self) -> None:
        """Drop all points of all curves (titles are kept)."""
        for d in self.data.values():
            d.reset()


class TensorBoard:
    """Event handler writing TensorBoard scalars to ``logdir`` (tensorboardX's event format).

    Tags: ``train/cost`` and ``train/<metric>`` per iteration (step: iterations so far, over
    all passes); ``pass/cost`` (mean of the pass's batch costs) and ``pass/<metric>`` per pass
    (step: pass id); ``test/cost`` and ``test/<metric>`` for each :class:`TestResult` given to
    the handler (step: the last finished pass, or how many results came before). Use it as
    ``trainer.train(..., event_handler=[my_handler, tb])`` and ``tb(trainer.test(...))``.

    Events are written in the calling thread and flushed (fsynced) every ``flush_secs``, at
    the end of each pass and on :meth:`close`. tensorboardX's own ``SummaryWriter`` writes
    from a thread that dies on a full disk, after which its next ``add_scalar`` blocks
    forever; here a failed write raises :class:`sculler.fileio.FileWriteError` naming the
    event file at once, so training never hangs on its logs.

    Args:
        logdir: directory of the event files (created when missing).
        flush_secs: how often pending scalars are written out.
    """

    def __init__(self, logdir: str | os.PathLike, flush_secs: float = 10) -> None:
        try:
            from tensorboardX.proto.event_pb2 import Event
            from tensorboardX.record_writer import RecordWriter
            from tensorboardX.summary import scalar
        except ImportError as exc:
            raise ImportError("sculler.plot.TensorBoard needs tensorboardX; install it with "
                              "`pip install sculler[tensorboard]`") from exc
        self.logdir = os.fspath(logdir)
        self.path = os.path.join(self.logdir, f"events.out.tfevents.{int(time.time())}."
                                 f"{socket.gethostname()}.{os.getpid()}.{next(_board_ids)}")
        self._event, self._summary = Event, scalar
        self.flush_secs = flush_secs
        self.iteration = 0
        self.last_pass: int | None = None
        self.tests = 0
        self._pass_costs: list[float] = []
        self._file = None
        self._failed: OSError | None = None
        with self._writing():
            os.makedirs(self.logdir, exist_ok=True)
            self._file = RecordWriter(self.path)
            self._file.write(Event(wall_time=time.time(),
                                   file_version="brain.Event:2").SerializeToString())
            self.flush()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self._failed is not None:
            raise self._failed
        try:
            yield
        except OSError as e:
            try:
                raise_write_error("TensorBoard", repr(self.path), e)
            except OSError as named:
                self._failed = named  # every later write says the same; close() is quiet
                raise

    def __call__(self, event: Any) -> None:
        from sculler import event as E

        if isinstance(event, E.EndIteration):
            self._scalars("train", event.cost, event.metrics, self.iteration)
            self._pass_costs.append(event.cost)
            self.iteration += 1
        elif isinstance(event, E.EndPass):
            cost = sum(self._pass_costs) / len(self._pass_costs) if self._pass_costs else None
            self._scalars("pass", cost, event.metrics, event.pass_id)
            self._pass_costs = []
            self.last_pass = event.pass_id
            self.flush()
        elif isinstance(event, E.TestResult):
            step = self.last_pass if self.last_pass is not None else self.tests
            self._scalars("test", event.cost, event.metrics, step)
            self.tests += 1
        elif isinstance(event, E.EndTraining):
            self.flush()

    def _scalars(self, group: str, cost: float | None, metrics: dict[str, float],
                 step: int) -> None:
        if cost is not None:
            self.append(f"{group}/cost", step, cost)
        for name, value in metrics.items():
            self.append(f"{group}/{name}", step, value)

    def append(self, title: str, step: float, value: float) -> None:
        """Write the point ``(step, value)`` of curve ``title`` (as :meth:`Ploter.append`)."""
        if self._file is None:
            raise ValueError(f"TensorBoard: {self.path!r} is closed; make a new TensorBoard")
        event = self._event(wall_time=time.time(), step=int(step),
                            summary=self._summary(title, float(value)))
        with self._writing():
            self._file.write(event.SerializeToString())
        if time.monotonic() >= self._next_flush:
            self.flush()

    def flush(self) -> None:
        """Write the pending scalars out and fsync the event file."""
        if self._file is not None:
            with self._writing():
                self._file.flush()
        self._next_flush = time.monotonic() + self.flush_secs

    def plot(self, path: str | os.PathLike | None = None) -> None:
        """Flush the pending scalars (what :meth:`Ploter.plot` calls draw; TensorBoard
        draws them itself), so code written for ``Ploter`` can switch."""
        self.flush()

    def close(self) -> None:
        """Flush and close the event file (a second call does nothing; after a failed write,
        which raised already, only the file is released)."""
        if self._file is None:
            return
        try:
            if self._failed is None:
                self.flush()
        finally:
            file, self._file = self._file, None
            with contextlib.suppress(OSError):  # a failed flush raised above
                file.close()

    def __enter__(self) -> TensorBoard:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_board_ids = itertools.count()
