"""Printing evaluators (PaddlePaddle's ``gradient_printer``, ``max_id_printer``,
``max_frame_printer`` and ``seq_text_printer``): debugging probes that log, or write to a
file, what their input layers hold each batch; they report no metric.

Messages go to the ``sculler.evaluator`` logger at INFO, in PaddlePaddle's formats
(``layer=<name> row max id vector:`` then ``id : value, `` per result and a line per row).
"""

from __future__ import annotations

import numpy as np

from sculler.backend import to_numpy
from sculler.core.evaluator_base import Evaluator, register_evaluator


def _log(message: str, *args: object) -> None:
    import logging  # (loaded when a printer first prints, not with sculler)

    logging.getLogger("sculler.evaluator").info(message, *args)


class Printer(Evaluator):
    """Reports nothing (``value()`` is 0); ``eval_batch`` prints."""

    reports_value = False

    def value(self) -> float:
        return 0.0

    def outputs(self, layers: dict):
        return [(name, layers[name].output) for name in self.config.input_layers]


def _top(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ids and values of the ``k`` largest entries, largest first."""
    ids = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(values, ids, axis=1)


@register_evaluator("gradient_printer")
class GradientPrinter(Printer):
    """Logs each input layer's output gradient (in training, after backward)."""

    def eval_batch(self, layers: dict) -> None:
        for name, arg in self.outputs(layers):
            if arg.grad is not None:
                _log("layer=%s grad matrix:\n%s", name,
                         np.array2string(to_numpy(arg.grad), precision=6))


@register_evaluator("max_id_printer")
class MaxIdPrinter(Printer):
    """Logs the ``num_results`` (default 1) largest entries of every row: ``id : value, ``."""

    def eval_batch(self, layers: dict) -> None:
        k = int(self.config.attrs.get("num_results") or 1)
        for name, arg in self.outputs(layers):
            if arg.value is None:
                continue
            ids, vals = _top(to_numpy(arg.value), k)
            rows = ["".join(f"{i} : {v:g}, " for i, v in zip(r_ids, r_vals))
                    for r_ids, r_vals in zip(ids, vals)]
            _log("layer=%s row max id vector:\n%s", name, "\n".join(rows))


@register_evaluator("max_frame_printer")
class MaxFramePrinter(Printer):
    """For a width-1 sequence, logs each sequence's ``num_results`` highest frames:
    ``frame : value, ... total N frames``."""

    def eval_batch(self, layers: dict) -> None:
        k = int(self.config.attrs.get("num_results") or 1)
        for name, arg in self.outputs(layers):
            if arg.seq_starts is None or arg.value is None or arg.value.shape[1] != 1:
                raise ValueError(f"evaluator {self.name!r} (max_frame_printer): layer {name!r} "
                                 "must be a width-1 sequence")
            starts, column = to_numpy(arg.seq_starts), to_numpy(arg.value)[:, 0]
            lines = []
            for a, b in zip(starts[:-1], starts[1:]):
                ids, vals = _top(column[None, a:b], min(k, b - a))
                lines.append("".join(f"{i} : {v:g}, " for i, v in zip(ids[0], vals[0]))
                             + f"total {b - a} frames")
            _log("layer=%s sequence max frames:\n%s", name, "\n".join(lines))


@register_evaluator("seq_text_printer")
class SequenceTextPrinter(Printer):
    """Appends each sequence of ids to ``result_file`` as a line ``<id>\\t<tokens>``: the
    sample id from a first input when there are two (else the running sequence number),
    tokens from ``dict_file`` (one per line) or the ids themselves, space-separated unless
    ``delimited`` is False; a nested sequence gives a line per sub-sequence. The file is
    emptied when the evaluator is created."""

    def __init__(self, config):
        super().__init__(config)
        self.path = config.attrs.get("result_file")
        if not self.path:
            raise ValueError(f"evaluator {config.name!r} (seq_text_printer): result_file is "
                             "required")
        dict_file = config.attrs.get("dict_file")
        self.dictionary = None
        if dict_file:
            with open(dict_file) as f:
                self.dictionary = [line.rstrip("\n") for line in f]
        self.sep = " " if config.attrs.get("delimited", True) else ""
        self.count = 0
        with open(self.path, "w"):
            pass

    def _tokens(self, ids) -> str:
        if self.dictionary is None:
            return self.sep.join(str(int(i)) for i in ids)
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.dictionary):
                raise ValueError(f"evaluator {self.name!r} (seq_text_printer): id {int(i)} is "
                                 f"not in the {len(self.dictionary)}-word dict_file")
            out.append(self.dictionary[int(i)])
        return self.sep.join(out)

    def eval_batch(self, layers: dict) -> None:
        args = [arg for _, arg in self.outputs(layers)]
        sample_ids = to_numpy(args[0].ids) if len(args) > 1 else None
        seqs = args[1:] if len(args) > 1 else args
        lines = []
        for arg in seqs:
            if arg.ids is None or arg.seq_starts is None:
                raise ValueError(f"evaluator {self.name!r} (seq_text_printer): input must be a "
                                 "sequence of ids (e.g. a max_id or beam_search output)")
            ids, starts = to_numpy(arg.ids), to_numpy(arg.seq_starts)
            subs = None if arg.sub_seq_starts is None else to_numpy(arg.sub_seq_starts)
            for s, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
                label = sample_ids[s] if sample_ids is not None else self.count + s
                if subs is None:
                    lines.append(f"{int(label)}\t{self._tokens(ids[a:b])}")
                    continue
                inner = subs[(subs >= a) & (subs <= b)]
                lines += [f"{int(label)}\t{self._tokens(ids[c:d])}"
                          for c, d in zip(inner[:-1], inner[1:])]
        self.count += len(to_numpy(seqs[0].seq_starts)) - 1
        with open(self.path, "a") as f:
            f.write("".join(line + "\n" for line in lines))
