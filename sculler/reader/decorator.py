"""Reader decorators: functions that take readers and return new readers.

A *reader* is a zero-argument callable that returns a fresh iterator over samples; a
decorator wraps one or more readers without reading anything until the new reader is
called. Threaded decorators (:func:`buffered`, :func:`xmap_readers`) re-raise any
exception from their worker threads in the consumer, so a failing reader never hangs.
"""

from __future__ import annotations

import codecs
import itertools
import queue
import random
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sculler.validate import iterate_reader, require_reader

__all__ = [
    "map_readers",
    "buffered",
    "compose",
    "chain",
    "shuffle",
    "ComposeNotAligned",
    "firstn",
    "xmap_readers",
    "PipeReader",
    "pipe_reader",
]

Reader = Callable[[], Iterable[Any]]


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_size(fn: str, name: str, value: Any, zero_means: str) -> int:
    """A buffer size: a positive int, or 0, which PaddlePaddle v2 accepted (``zero_means``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{fn}: {name} must be an int >= 0 (0: {zero_means}), got {value!r}")
    return value


def map_readers(func: Callable[..., Any], *readers: Reader) -> Reader:
    """Reader of ``func(a, b, ...)`` over samples taken in lockstep from ``readers``.

    Stops at the shortest reader, like :func:`map`.

    Example:
        >>> list(map_readers(lambda a, b: a + b, lambda: [1, 2], lambda: [10, 20])())
        [11, 22]
    """

    for i, r in enumerate(readers):
        require_reader(r, f"map_readers: reader {i}")

    def reader() -> Iterator[Any]:
        yield from map(func, *[iterate_reader(r, f"map_readers: reader {i}")
                               for i, r in enumerate(readers)])

    return reader


def shuffle(reader: Reader, buf_size: int) -> Reader:
    """Reader that shuffles ``reader`` within consecutive windows of ``buf_size`` samples.

    Memory is bounded by ``buf_size``; a window as large as the data set gives a full
    shuffle; ``buf_size=0`` (or 1) leaves the order as it is, as in PaddlePaddle v2. Uses the
    global :mod:`random` state (seed it for repeatable order).
    """
    require_reader(reader, "shuffle(reader)")
    _check_size("shuffle", "buf_size", buf_size, "no shuffling")

    def data_reader() -> Iterator[Any]:
        buf: list[Any] = []
        for sample in iterate_reader(reader, "shuffle(reader)"):
            buf.append(sample)
            if len(buf) >= buf_size:
                random.shuffle(buf)
                yield from buf
                buf = []
        if buf:
            random.shuffle(buf)
            yield from buf

    return data_reader


def chain(*readers: Reader) -> Reader:
    """Reader of all samples of ``readers[0]``, then ``readers[1]``, and so on."""

    for i, r in enumerate(readers):
        require_reader(r, f"chain: reader {i}")

    def reader() -> Iterator[Any]:
        for i, r in enumerate(readers):
            yield from iterate_reader(r, f"chain: reader {i}")

    return reader


class ComposeNotAligned(ValueError):
    """Raised by :func:`compose` when its readers yield different numbers of samples."""


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def compose(*readers: Reader, check_alignment: bool = True) -> Reader:
    """Reader of flattened tuples: ``(1, 2)``, ``3``, ``(4, 5)`` -> ``(1, 2, 3, 4, 5)``.

    Args:
        readers: readers read in lockstep; tuple samples are spliced, others appended.
        check_alignment: raise :class:`ComposeNotAligned` when one reader ends before
            another; when False the extra trailing samples are silently dropped.
    """

    for i, r in enumerate(readers):
        require_reader(r, f"compose: reader {i}")

    def reader() -> Iterator[tuple]:
        its = [iterate_reader(r, f"compose: reader {i}") for i, r in enumerate(readers)]
        if not check_alignment:
            for outputs in zip(*its):
                yield sum(map(_as_tuple, outputs), ())
            return
        end = object()
        for outputs in itertools.zip_longest(*its, fillvalue=end):
            if any(o is end for o in outputs):
                raise ComposeNotAligned(
                    "outputs of composed readers are not aligned: one reader ended before "
                    "the others; pass check_alignment=False to drop the trailing samples"
                )
            yield sum(map(_as_tuple, outputs), ())

    return reader


class _End:
    """Marks the end of a worker's stream in a queue."""


class _Error:
    """Carries an exception from a worker thread to the consumer."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _put(q: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put ``item`` unless ``stop`` is set first; lets workers exit when the consumer quits."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def buffered(reader: Reader, size: int) -> Reader:
    """Reader that prefetches up to ``size`` samples of ``reader`` in a background thread.

    Overlaps slow reading (disk, decoding) with consumption; exceptions raised by
    ``reader`` are re-raised in the consumer. ``size=0`` puts no bound on the buffer (as
    PaddlePaddle v2's ``Queue(maxsize=0)``).
    """
    require_reader(reader, "buffered(reader)")
    _check_size("buffered", "size", size, "an unbounded buffer")

    def worker(q: queue.Queue, stop: threading.Event) -> None:
        try:
            for sample in iterate_reader(reader, "buffered(reader)"):
                if not _put(q, sample, stop):
                    return
            _put(q, _End(), stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            _put(q, _Error(exc), stop)

    def data_reader() -> Iterator[Any]:
        q: queue.Queue = queue.Queue(maxsize=size)
        stop = threading.Event()
        t = threading.Thread(target=worker, args=(q, stop), daemon=True)
        t.start()
        try:
            while True:
                item = q.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, _Error):
                    raise item.exc
                yield item
        finally:
            stop.set()

    return data_reader


def firstn(reader: Reader, n: int) -> Reader:
    """Reader of at most the first ``n`` samples of ``reader``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    require_reader(reader, "firstn(reader)")

    def firstn_reader() -> Iterator[Any]:
        yield from itertools.islice(iterate_reader(reader, "firstn(reader)"), n)

    return firstn_reader


def xmap_readers(
    mapper: Callable[[Any], Any],
    reader: Reader,
    process_num: int,
    buffer_size: int,
    order: bool = False,
    use_process: bool = False,
) -> Reader:
    """Reader of ``mapper(sample)`` computed by ``process_num`` parallel workers.

    Args:
        mapper: function applied to every sample.
        reader: the source reader (read in one background thread).
        process_num: number of workers.
        buffer_size: bound on samples waiting to be mapped and results waiting to be read
            (0: no bound, as PaddlePaddle v2's ``Queue(0)``).
        order: keep the source order (results are re-sequenced in the consumer);
            otherwise results come out as soon as they are ready.
        use_process: run ``mapper`` in worker *processes* (``concurrent.futures``)
            instead of threads, for mappers that hold the GIL (pure-Python decoding).
            ``mapper`` and the samples must then be picklable.

    An exception raised by ``reader`` or ``mapper`` is re-raised in the consumer.
    """
    require_reader(reader, "xmap_readers(reader)")
    _check_positive("process_num", process_num)
    _check_size("xmap_readers", "buffer_size", buffer_size, "unbounded queues")
    if use_process:
        return _xmap_processes(mapper, reader, process_num, buffer_size, order)

    def read_worker(in_q: queue.Queue, out_q: queue.Queue, stop: threading.Event) -> None:
        try:
            for i, sample in enumerate(reader()):
                if not _put(in_q, (i, sample), stop):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            _put(out_q, _Error(exc), stop)
        for _ in range(process_num):
            _put(in_q, _End(), stop)

    def map_worker(in_q: queue.Queue, out_q: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                item = in_q.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(item, _End):
                _put(out_q, item, stop)
                return
            i, sample = item
            try:
                result = (i, mapper(sample))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                _put(out_q, _Error(exc), stop)
                return
            if not _put(out_q, result, stop):
                return

    def xreader() -> Iterator[Any]:
        in_q: queue.Queue = queue.Queue(buffer_size)
        out_q: queue.Queue = queue.Queue(buffer_size)
        stop = threading.Event()
        threads = [threading.Thread(target=read_worker, args=(in_q, out_q, stop), daemon=True)]
        threads += [
            threading.Thread(target=map_worker, args=(in_q, out_q, stop), daemon=True)
            for _ in range(process_num)
        ]
        for t in threads:
            t.start()
        pending: dict[int, Any] = {}
        next_index = 0
        finished = 0
        try:
            while finished < process_num:
                item = out_q.get()
                if isinstance(item, _End):
                    finished += 1
                elif isinstance(item, _Error):
                    raise item.exc
                elif not order:
                    yield item[1]
                else:
                    pending[item[0]] = item[1]
                    while next_index in pending:
                        yield pending.pop(next_index)
                        next_index += 1
        finally:
            stop.set()

    return xreader


def _xmap_processes(
    mapper: Callable[[Any], Any], reader: Reader, process_num: int, buffer_size: int, order: bool
) -> Reader:
    """Process-pool variant of :func:`xmap_readers`: at most ``buffer_size`` tasks in flight
    (no bound when it is 0)."""

    def xreader() -> Iterator[Any]:
        import concurrent.futures  # loaded on first use: it is the slowest import of the readers

        with concurrent.futures.ProcessPoolExecutor(max_workers=process_num) as pool:
            in_flight: deque[concurrent.futures.Future] = deque()
            try:
                for sample in reader():
                    in_flight.append(pool.submit(mapper, sample))
                    while buffer_size and len(in_flight) >= buffer_size:
                        yield from _drain_one(in_flight, order)
                while in_flight:
                    yield from _drain_one(in_flight, order)
            finally:
                for f in in_flight:
                    f.cancel()

    return xreader


def _drain_one(in_flight: deque, order: bool) -> Iterator[Any]:
    """Yield one finished result: the oldest when ``order``, else the first one done."""
    if order:
        yield in_flight.popleft().result()
        return
    import concurrent.futures

    done, _ = concurrent.futures.wait(in_flight, return_when=concurrent.futures.FIRST_COMPLETED)
    f = next(iter(done))
    in_flight.remove(f)
    yield f.result()


class PipeReader:
    """Stream the standard output of a command (``cat``, ``hadoop fs -cat``, ``curl``...).

    Args:
        command: the command line, split with :func:`shlex.split` (no shell).
        bufsize: bytes read per chunk.
        file_type: ``"plain"`` or ``"gzip"`` (decompressed on the fly).

    Example:
        >>> [line for line in PipeReader("printf 'a\\nb\\n'").get_line()]
        ['a', 'b']
    """

    def __init__(self, command: str, bufsize: int = 8192, file_type: str = "plain") -> None:
        if not isinstance(command, str):
            raise TypeError(f"command must be a str, got {type(command).__name__}")
        if file_type not in ("plain", "gzip"):
            raise ValueError(f"file_type must be 'plain' or 'gzip', got {file_type!r}")
        self.command = command
        self.bufsize = _check_positive("bufsize", bufsize)
        self.file_type = file_type

    def get_line(self, cut_lines: bool = True, line_break: str = "\n") -> Iterator[Any]:
        """Yield decoded lines (``cut_lines``) or raw decompressed byte chunks.

        A final line without a trailing ``line_break`` is yielded too. Raises
        ``RuntimeError`` when the command exits with a non-zero status.
        """
        import shlex
        import subprocess  # (with shlex: loaded when a pipe is first read, not with sculler)

        dec = zlib.decompressobj(32 + zlib.MAX_WBITS) if self.file_type == "gzip" else None
        proc = subprocess.Popen(shlex.split(self.command), stdout=subprocess.PIPE)
        text = codecs.getincrementaldecoder("utf-8")()
        remained = ""
        finished = False
        try:
            while True:
                buf = proc.stdout.read1(self.bufsize)  # what is there; no waiting for a full buffer
                if not buf:
                    finished = True
                    break
                if dec is not None:
                    buf = dec.decompress(buf)
                if not cut_lines:
                    yield buf
                    continue
                lines = (remained + text.decode(buf)).split(line_break)
                remained = lines.pop()
                yield from lines
            if cut_lines and remained:
                yield remained
        finally:
            proc.stdout.close()
            if not finished:  # the consumer stopped early: do not wait for the command
                proc.kill()
            code = proc.wait()
        if code != 0:
            raise RuntimeError(f"command {self.command!r} exited with status {code}")


def pipe_reader(
    left_cmd: str,
    parser: Callable[[str], Any] | None = None,
    bufsize: int = 8192,
    file_type: str = "plain",
    cut_lines: bool = True,
    line_break: str = "\n",
) -> Reader:
    """Reader of ``parser(line)`` for each line the command ``left_cmd`` prints (see
    :class:`PipeReader`; the argument names are PaddlePaddle v2's).

    The command runs anew each time the reader is called, so every pass re-reads it.
    """
    PipeReader(left_cmd, bufsize, file_type)  # validate arguments now, not at first pass

    def reader() -> Iterator[Any]:
        for line in PipeReader(left_cmd, bufsize, file_type).get_line(cut_lines, line_break):
            yield parser(line) if parser is not None else line

    return reader
