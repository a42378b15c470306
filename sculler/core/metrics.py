"""More pass-level evaluators, as PaddlePaddle's Evaluator.cpp and ChunkEvaluator.cpp compute
them: ``precision_recall``, ``pnpair``, ``chunk``, ``last-column-sum``, ``value_printer`` and
``ctc_edit_distance`` (CTCErrorEvaluator.cpp).

``value()`` is each evaluator's headline number (F1, positive/negative pair ratio, ...);
``values()`` gives every statistic it keeps, by Paddle's key names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module, is_gpu_array, to_device_of, to_numpy
from sculler.core.evaluator_base import Evaluator, register_evaluator
from sculler.math import cuda
from sculler.math.sparse import CsrMatrix


def _ratio(num: float, den: float, empty: float = 1.0) -> float:
    return num / den if den > 0 else empty


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p > 0 or r > 0 else 0.0


def sample_weights(ev: Evaluator, layers: dict, index: int, n: int) -> np.ndarray:
    """The per-sample weights of input ``index`` (a ``(n, 1)`` column; ones without it)."""
    if len(ev.config.input_layers) <= index:
        return np.ones(n)
    w = to_numpy(layers[ev.config.input_layers[index]].output.value)
    if w is None or w.shape != (n, 1):
        raise ValueError(f"evaluator {ev.name!r}: weight input "
                         f"{ev.config.input_layers[index]!r} must be a ({n}, 1) column")
    return w[:, 0].astype(np.float64)


def device_weights(ev: Evaluator, layers: dict, index: int, like: Any) -> Any | None:
    """:func:`sample_weights` on the GPU: the ``(n,)`` float64 weights of input ``index`` on
    ``like``'s device (``n`` its rows), or None where that input is not a ``(n, 1)`` column
    (``eval_batch`` then reports it). The caller handles an evaluator without the input."""
    w = layers[ev.config.input_layers[index]].output.value
    if w is None or w.shape != (like.shape[0], 1):
        return None
    return to_device_of(w, like)[:, 0].astype(np.float64)


def _ids(ev: Evaluator, arg, what: str) -> np.ndarray:
    """Integer ids of an argument: its ``ids``, a width-1 value, or the arg-max of each row."""
    if arg.ids is not None:
        return to_numpy(arg.ids).astype(np.int64).reshape(-1)
    v = to_numpy(arg.value)
    if v is None or isinstance(v, CsrMatrix):
        raise ValueError(f"evaluator {ev.name!r}: {what} must carry ids or a dense value")
    return (v[:, 0] if v.shape[1] == 1 else v.argmax(axis=1)).astype(np.int64)


@register_evaluator("precision_recall")
class PrecisionRecall(Evaluator):
    """Per-class TP/FP/FN/TN of arg-max predictions against ids (or of ``p >= threshold``
    against a multi-hot sparse label). ``precision = TP/(TP+FP)``, ``recall = TP/(TP+FN)``
    (1 when empty), ``F1 = 2PR/(P+R)``. With ``positive_label`` the value is that class's F1;
    otherwise the macro-average F1 (the mean P and mean R over classes, then F1)."""

    additive = True

    def start(self) -> None:
        super().start()
        self.stats = None  # (classes, 4): TP, TN, FP, FN
        self.multi_label = False

    def device_sums(self, layers: dict) -> tuple[Any, Any] | None:
        """On the GPU the batch's (classes, 4) counts are taken there, for id labels known to
        be in range (the feeder checked them) and for dense multi-hot labels; sparse labels
        are counted on the host."""
        names = self.config.input_layers
        p = layers[names[0]].output.value
        label = layers[names[1]].output
        if not is_gpu_array(p) or p.ndim != 2:
            return None
        xp = get_array_module(p)
        n, dim = p.shape
        w = device_weights(self, layers, 2, p) if len(names) > 2 else xp.ones(n, np.float64)
        if w is None:
            return None
        if label.ids is not None:
            if not label.ids_known_below(dim) or label.ids.shape[0] != n:
                return None
            stats = xp.empty((dim, 4), np.float64)
            cuda.class_counts(p.argmax(axis=1), to_device_of(label.ids, p).reshape(-1), w,
                              stats)
            return stats, (n, False)
        truth = label.value
        if not is_gpu_array(truth) or truth.shape != (n, dim):
            return None
        on = p >= self.config.attrs.get("threshold", 0.5)
        truth = truth > 0.5
        ww = w[:, None]
        stats = xp.stack([(ww * (on & truth)).sum(axis=0), (ww * (~on & ~truth)).sum(axis=0),
                          (ww * (on & ~truth)).sum(axis=0), (ww * (~on & truth)).sum(axis=0)],
                         axis=1)
        return stats, (n, True)

    def add_sums(self, sums: np.ndarray, extra: Any) -> None:
        """``sums``: the batch's (classes, 4) counts; ``extra``: (samples, multi-label)."""
        self._start_stats(sums.shape[0])
        self.stats += sums
        self.count += extra[0]
        self.multi_label |= extra[1]

    def merge(self, other: Evaluator) -> None:
        if other.stats is not None:
            self.add_sums(other.stats, (other.count, other.multi_label))

    def _start_stats(self, dim: int) -> None:
        if self.stats is None or self.stats.shape[0] != dim:
            self.stats = np.zeros((dim, 4))

    def eval_batch(self, layers: dict) -> None:
        names = self.config.input_layers
        p = to_numpy(layers[names[0]].output.value).astype(np.float64)
        label = layers[names[1]].output
        n, dim = p.shape
        w = sample_weights(self, layers, 2, n)
        self._start_stats(dim)
        if label.ids is not None:
            y = to_numpy(label.ids).astype(np.int64).reshape(-1)
            if y.size and (y.min() < 0 or y.max() >= dim):
                raise ValueError(f"evaluator {self.name!r}: label ids must be in [0, {dim})")
            pred = p.argmax(axis=1)
            hit = pred == y
            np.add.at(self.stats[:, 0], pred[hit], w[hit])
            np.add.at(self.stats[:, 2], pred[~hit], w[~hit])
            np.add.at(self.stats[:, 3], y[~hit], w[~hit])
            self.stats[:, 1] += w.sum()
            np.subtract.at(self.stats[:, 1], pred, w)
            np.subtract.at(self.stats[:, 1], y[~hit], w[~hit])
        else:
            self.multi_label = True
            value = label.value
            truth = value.toarray() > 0 if isinstance(value, CsrMatrix) else (
                to_numpy(value) > 0.5)
            on = p >= self.config.attrs.get("threshold", 0.5)
            ww = w[:, None]
            self.stats[:, 0] += (ww * (on & truth)).sum(axis=0)
            self.stats[:, 1] += (ww * (~on & ~truth)).sum(axis=0)
            self.stats[:, 2] += (ww * (on & ~truth)).sum(axis=0)
            self.stats[:, 3] += (ww * (~on & truth)).sum(axis=0)
        self.count += n

    def values(self) -> dict[str, float]:
        if self.stats is None:
            return {}
        tp, _, fp, fn = self.stats.T
        label = self.config.attrs.get("positive_label", -1)
        if label is not None and label >= 0:
            if label >= len(tp):
                raise ValueError(f"evaluator {self.name!r}: positive_label {label} is not in "
                                 f"[0, {len(tp)})")
            prec, rec = _ratio(tp[label], tp[label] + fp[label]), _ratio(
                tp[label], tp[label] + fn[label])
            return {"precision": prec, "recall": rec, "F1-score": _f1(prec, rec)}
        precs = [_ratio(a, a + b) for a, b in zip(tp, fp)]
        recs = [_ratio(a, a + b) for a, b in zip(tp, fn)]
        mp, mr = float(np.mean(precs)), float(np.mean(recs))
        up, ur = _ratio(tp.sum(), tp.sum() + fp.sum()), _ratio(tp.sum(), tp.sum() + fn.sum())
        out = {"macro-average-precision": mp, "macro-average-recall": mr,
               "macro-average-F1-score": _f1(mp, mr), "micro-average-precision": up}
        if self.multi_label:
            out.update({"micro-average-recall": ur, "micro-average-F1-score": _f1(up, ur)})
        return out

    def value(self) -> float:
        vals = self.values()
        return vals.get("F1-score", vals.get("macro-average-F1-score", 0.0))


@register_evaluator("pnpair")
class PnPair(Evaluator):
    """Positive-negative pair ratio of a ranking: over pairs of samples of one query (``info``
    ids) with different labels, pairs ordered like their labels count as positive, reversed
    ones as negative (ties as neither), each weighted by the mean of the two weights.
    Value: ``pos / neg`` (``pos`` when there is no negative pair)."""

    def start(self) -> None:
        super().start()
        self.rows: list[np.ndarray] = []

    def eval_batch(self, layers: dict) -> None:
        names = self.config.input_layers
        score = to_numpy(layers[names[0]].output.value)[:, -1].astype(np.float64)
        label = _ids(self, layers[names[1]].output, "label")
        query = _ids(self, layers[names[2]].output, "query id (info)")
        w = sample_weights(self, layers, 3, score.shape[0])
        self.rows.append(np.stack([query, label, score, w], axis=1))
        self.count += score.shape[0]

    def values(self) -> dict[str, float]:
        pos = neg = special = 0.0
        if self.rows:
            data = np.concatenate(self.rows)
            for q in np.unique(data[:, 0]):
                _, lab, s, w = data[data[:, 0] == q].T
                iu = np.triu_indices(lab.size, k=1)
                dl = np.sign(lab[:, None] - lab[None, :])[iu]
                ds = np.sign(s[:, None] - s[None, :])[iu]
                pw = ((w[:, None] + w[None, :]) / 2.0)[iu]
                diff = dl != 0
                pos += pw[diff & (dl == ds)].sum()
                neg += pw[diff & (dl == -ds)].sum()
                special += pw[diff & (ds == 0)].sum()
        return {"pos": float(pos), "neg": float(neg), "special": float(special),
                "pos/neg": float(pos / (neg if neg > 0 else 1.0))}

    def value(self) -> float:
        return self.values()["pos/neg"]


# scheme -> (tag types, begin, inside, end, single); -1 = the scheme has no such tag
CHUNK_SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1),
                 "IOBES": (4, 0, 1, 2, 3), "plain": (1, -1, -1, -1, -1)}


def chunk_segments(tags, scheme: str, num_chunk_types: int) -> list[tuple[int, int, int]]:
    """The (begin, end, type) chunks of one tag sequence; ``tag = type * n_tag_types +
    tag_type``, and ``num_chunk_types * n_tag_types`` (or more) is the outside tag."""
    n_types, t_begin, t_inside, t_end, t_single = CHUNK_SCHEMES[scheme]
    other = num_chunk_types

    def is_end(prev_tag, prev_type, tag, typ):
        if prev_type == other:
            return False
        if typ == other or typ != prev_type:
            return True
        if prev_tag in (t_begin, t_inside):
            return tag in (t_begin, t_single)
        return prev_tag in (t_end, t_single)

    def is_begin(prev_tag, prev_type, tag, typ):
        if prev_type == other:
            return typ != other
        if typ == other:
            return False
        if typ != prev_type or tag in (t_begin, t_single):
            return True
        if tag in (t_inside, t_end):
            return prev_tag in (t_end, t_single)
        return False

    segments, start, in_chunk, tag, typ = [], 0, False, -1, other
    for i, label in enumerate(int(v) for v in tags):
        prev_tag, prev_type = tag, typ
        tag, typ = label % n_types, min(label // n_types, other)
        if in_chunk and is_end(prev_tag, prev_type, tag, typ):
            segments.append((start, i - 1, prev_type))
            in_chunk = False
        if is_begin(prev_tag, prev_type, tag, typ):
            start, in_chunk = i, True
    if in_chunk:
        segments.append((start, len(tags) - 1, typ))
    return segments


@register_evaluator("chunk")
class ChunkEvaluator(Evaluator):
    """Chunk F1 of predicted against true tag sequences (IOB, IOE, IOBES or plain): a chunk
    counts as correct when its begin, end and type all match. ``P = correct / predicted``,
    ``R = correct / true``, value ``F1 = 2PR/(P+R)``; ``excluded_chunk_types`` are ignored."""

    def start(self) -> None:
        super().start()
        self.num_label = self.num_output = self.num_correct = 0

    def eval_batch(self, layers: dict) -> None:
        names = self.config.input_layers
        out, lab = layers[names[0]].output, layers[names[1]].output
        pred, truth = _ids(self, out, "input"), _ids(self, lab, "label")
        if pred.shape != truth.shape:
            raise ValueError(f"evaluator {self.name!r}: {pred.size} predicted tags for "
                             f"{truth.size} labels")
        starts = lab.seq_starts if lab.seq_starts is not None else out.seq_starts
        if starts is None:
            starts = np.array([0, truth.size])
        scheme = self.config.attrs.get("chunk_scheme", "IOB")
        n = int(self.config.attrs["num_chunk_types"])
        excluded = set(self.config.attrs.get("excluded_chunk_types") or [])
        for b, e in zip(starts[:-1], starts[1:]):
            segs_o = {s for s in chunk_segments(pred[b:e], scheme, n) if s[2] not in excluded}
            segs_l = {s for s in chunk_segments(truth[b:e], scheme, n) if s[2] not in excluded}
            self.num_correct += len(segs_o & segs_l)
            self.num_output += len(segs_o)
            self.num_label += len(segs_l)
        self.count += len(starts) - 1

    def values(self) -> dict[str, float]:
        p = _ratio(self.num_correct, self.num_output, 0.0)
        r = _ratio(self.num_correct, self.num_label, 0.0)
        return {"precision": p, "recall": r, "F1-score": _f1(p, r) if self.num_correct else 0.0,
                "true_chunks": self.num_label, "result_chunks": self.num_output,
                "correct_chunks": self.num_correct}

    def value(self) -> float:
        return self.values()["F1-score"]


@register_evaluator("last-column-sum")
class ColumnSum(Evaluator):
    """Weighted mean of one column (attr ``column``, default -1: the last) over the pass:
    ``sum_i w_i x_i[c] / sum_i w_i``."""

    additive = True

    def start(self) -> None:
        super().start()
        self.sums = None

    def device_sums(self, layers: dict) -> tuple[Any, Any] | None:
        """On the GPU the weighted column sums and the weights' sum are taken there."""
        x = layers[self.config.input_layers[0]].output.value
        if not is_gpu_array(x) or x.ndim != 2:
            return None
        xp = get_array_module(x)
        if len(self.config.input_layers) <= 1:
            return x.sum(axis=0, dtype=np.float64), x.shape[0]
        w = device_weights(self, layers, 1, x)
        if w is None:
            return None
        return xp.concatenate([(w[:, None] * x).sum(axis=0), w.sum().reshape(1)]), None

    def add_sums(self, sums: np.ndarray, extra: Any) -> None:
        """``sums``: the column sums, then (weighted, ``extra`` None) the weights' sum;
        unweighted ``extra`` is the number of rows."""
        if extra is None:
            self._add(sums[:-1], float(sums[-1]))
        else:
            self._add(sums, float(extra))

    def eval_batch(self, layers: dict) -> None:
        x = to_numpy(layers[self.config.input_layers[0]].output.value).astype(np.float64)
        w = sample_weights(self, layers, 1, x.shape[0])
        self._add((w[:, None] * x).sum(axis=0), float(w.sum()))

    def _add(self, col: np.ndarray, weight: float) -> None:
        if self.sums is not None and self.sums.shape != col.shape:
            raise ValueError(f"evaluator {self.name!r}: input width changed from "
                             f"{self.sums.size} to {col.size}")
        self.sums = col.copy() if self.sums is None else self.sums + col
        self.total += weight

    def merge(self, other: Evaluator) -> None:
        if other.sums is not None:
            self._add(other.sums, other.total)

    def value(self) -> float:
        if self.sums is None or self.total == 0:
            return 0.0
        c = int(self.config.attrs.get("column", -1))
        if not -self.sums.size <= c < self.sums.size:
            raise ValueError(f"evaluator {self.name!r}: column {c} is out of range for width "
                             f"{self.sums.size}")
        return float(self.sums[c] / self.total)


@register_evaluator("value_printer")
class ValuePrinter(Evaluator):
    """Logs each input layer's values (``ids`` when it has no value) to the
    ``sculler.evaluator`` logger at INFO; it keeps no statistic, so ``value()`` is 0."""

    reports_value = False

    def eval_batch(self, layers: dict) -> None:
        import logging

        logger = logging.getLogger("sculler.evaluator")
        for name in self.config.input_layers:
            arg = layers[name].output
            shown = arg.value if arg.value is not None else arg.ids
            if isinstance(shown, CsrMatrix):
                shown = shown.toarray()
            logger.info("layer=%s %s", name, np.array2string(to_numpy(shown), precision=6))

    def value(self) -> float:
        return 0.0


@register_evaluator("sum")
class SumEvaluator(Evaluator):
    """The sum of the input's values (or ids) per sample: ``sum_i sum_j x_ij / n``."""

    additive = True

    def device_sums(self, layers: dict) -> tuple[Any, Any] | None:
        """On the GPU the batch's sum is taken there (one number comes back)."""
        out = layers[self.config.input_layers[0]].output
        v = out.value if out.value is not None else out.ids
        if not is_gpu_array(v):
            return None
        return v.sum(dtype=np.float64), v.shape[0]

    def eval_batch(self, layers: dict) -> None:
        out = layers[self.config.input_layers[0]].output
        v = to_numpy(out.value if out.value is not None else out.ids)
        self.total += float(v.sum(dtype=np.float64))
        self.count += v.shape[0]


@register_evaluator("auc")
class AucEvaluator(Evaluator):
    def start(self) -> None:
        super().start()
        self.scores: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []

    def eval_batch(self, layers: dict) -> None:
        out = to_numpy(layers[self.config.input_layers[0]].output.value)
        lab = layers[self.config.input_layers[1]].output
        ids = to_numpy(lab.ids if lab.ids is not None else lab.value).reshape(-1)
        self.scores.append(out[:, -1].astype(np.float64))
        self.labels.append(ids > 0.5)

    def value(self) -> float:
        if not self.scores:
            return 0.0
        s, y = np.concatenate(self.scores), np.concatenate(self.labels)
        npos, nneg = int(y.sum()), int((~y).sum())
        if npos == 0 or nneg == 0:
            return 0.0
        order = np.argsort(s, kind="mergesort")
        ranks = np.empty(len(s))
        sorted_s = s[order]
        # average ranks over ties (1-based)
        _, first, counts = np.unique(sorted_s, return_index=True, return_counts=True)
        avg = first + (counts + 1) / 2.0
        ranks[order] = np.repeat(avg, counts)
        return float((ranks[y].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))


def ctc_best_path(probs, blank: int) -> list[int]:
    """Greedy CTC decoding: the arg-max class of every frame, repeats merged unless a blank
    separates them, blanks dropped."""
    out: list[int] = []
    prev = -1
    for k in np.asarray(probs).argmax(axis=1).tolist():
        if k != blank and (not out or k != out[-1] or prev == blank):
            out.append(k)
        prev = k
    return out


def edit_operations(truth: list[int], guess: list[int]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) of one Levenshtein alignment of ``guess`` to
    ``truth`` (backtracking prefers a match, then substitution, deletion, insertion)."""
    n, m = len(truth), len(guess)
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1,
                          d[i - 1, j - 1] + (truth[i - 1] != guess[j - 1]))
    i, j, sub, dele, ins = n, m, 0, 0, 0
    while i and j:
        if d[i, j] == d[i - 1, j - 1] and truth[i - 1] == guess[j - 1]:
            i, j = i - 1, j - 1
        elif d[i, j] == d[i - 1, j - 1] + 1:
            sub, i, j = sub + 1, i - 1, j - 1
        elif d[i, j] == d[i - 1, j] + 1:
            dele, i = dele + 1, i - 1
        else:
            ins, j = ins + 1, j - 1
    return sub, dele + i, ins + j


@register_evaluator("ctc_edit_distance")
class CTCErrorEvaluator(Evaluator):
    """CTC edit distance of greedy decodings (PaddlePaddle's ``ctc_error``): per sequence,
    ``levenshtein(label, best_path(output)) / max(|label|, |decoded|)`` (blank = the last
    class), averaged over sequences; also deletion/insertion/substitution rates (each over
    the same denominator) and ``sequence_error``, the fraction of sequences not exact."""

    def start(self) -> None:
        super().start()
        self.ops = np.zeros(3)
        self.wrong = 0

    def eval_batch(self, layers: dict) -> None:
        names = self.config.input_layers
        out, lab = layers[names[0]].output, layers[names[1]].output
        probs = to_numpy(out.value)
        if out.seq_starts is None or lab.seq_starts is None or lab.ids is None or (
                probs is None or isinstance(probs, CsrMatrix)):
            raise ValueError(f"evaluator {self.name!r}: needs a dense output sequence and an id "
                             f"label sequence, got {out.describe()} and {lab.describe()}")
        if out.num_sequences != lab.num_sequences:
            raise ValueError(f"evaluator {self.name!r}: {out.num_sequences} output sequences "
                             f"for {lab.num_sequences} label sequences")
        ids = to_numpy(lab.ids).tolist()
        so, sl = out.seq_starts, lab.seq_starts
        for n in range(out.num_sequences):
            truth = ids[sl[n]:sl[n + 1]]
            guess = ctc_best_path(probs[so[n]:so[n + 1]], probs.shape[1] - 1)
            ops = edit_operations(truth, guess)
            longest = max(len(truth), len(guess))
            if longest:
                self.ops += np.asarray(ops) / longest
                self.total += sum(ops) / longest
            self.wrong += sum(ops) > 0
        self.count += out.num_sequences

    def values(self) -> dict[str, float]:
        c = max(self.count, 1)
        return {"error": self.total / c, "substitution_error": self.ops[0] / c,
                "deletion_error": self.ops[1] / c, "insertion_error": self.ops[2] / c,
                "sequence_error": self.wrong / c}
