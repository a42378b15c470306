"""The ``beam_search`` layer: a recurrent group's step network run as a generator.

attrs as for ``recurrent_layer_group`` (``step_model``, ``statics``, ``memories``) plus
``generator``: ``{"agent": the generated-id memory, "prob_layer": the step layer giving the
next-word probabilities, "bos_id", "eos_id", "beam_size", "max_length", "num_results"}``.

Search (PaddlePaddle's RecurrentGradientMachine::beamSearch; each step one forward of the step
network over all live paths of all samples, two frames alternating):

- every sample starts with one path: id ``bos_id``, score 0, memories booted as in training;
  a path's memories are its parent's step outputs (a whole sequence for a sequence-valued
  memory, e.g. an external memory booted from a sequence and rewritten each step);
- each live path expands to its ``min(beam_size, V)`` most probable next ids; a candidate's
  score is its parent's plus ``ln p`` (no length normalisation);
- a candidate that is ``eos_id`` or has ``max_length`` ids is finished at once; of the other
  candidates each sample keeps its ``beam_size`` best (ties in id order);
- pruning, as PaddlePaddle's ``beamShrink``: a sample's finished paths scoring below its worst
  kept live path are dropped; if it then has at least ``beam_size`` finished paths and the
  lowest finished score it has seen (starting at 0) is at least its best live score, its live
  paths are dropped. So a wide beam is not an exhaustive search: a path that ended early can be
  dropped by the first rule;
- the search ends when no path is live or after ``max_length`` steps.

On the GPU the paths' states stay there; the bookkeeping above is on the host, which reads back
each step's best ids and scores in one copy and sends the next step's ids and gather rows in
one asynchronous copy.

Output (what ``infer(field=['prob', 'id'])`` returns, as PaddlePaddle): ``value`` = (N, R)
total log-probabilities of each sample's R = ``num_results`` best paths, best first (also
when R = 1; missing results are -inf); ``ids`` = for R = 1 the best path of each sample (ids
after bos, eos included when the path ended on it), for R > 1 per sample and result
``[len, id_1 .. id_len, -1]``; ``seq_starts`` delimit the samples.
"""

from __future__ import annotations

import numpy as np

from sculler.backend import (
    get_array_module,
    gpu_enabled,
    is_gpu_array,
    to_gpu_together,
    to_numpy,
)
from sculler.core.argument import Argument
from sculler.core.layer import PASS_TEST, register_layer
from sculler.core.recurrent_group import sequence_rows
from sculler.layers.recurrent_group import RecurrentGroupLayer, _set

TINY = 1e-30


@register_layer("beam_search")
class BeamSearchLayer(RecurrentGroupLayer):
    """Beam-search generation over a step network (see the module doc)."""

    min_inputs = 1
    hoist_tail = False  # each step's scores choose the next step's inputs

    @classmethod
    def infer_size(cls, config, inputs):
        return int(config.attrs["generator"]["num_results"])

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.gen = self.attr("generator")
        self.output = Argument()
        self.need_gradient = False

    def _num_samples(self) -> int:
        inputs = [s["input"] for s in self.statics]
        inputs += [m["boot"] for m in self.memories if m.get("boot") is not None]
        for i in inputs:
            arg = self.get_input(i)
            return arg.num_sequences if arg.seq_starts is not None else arg.batch_size
        raise ValueError(f"beam_search {self.group!r}: needs a StaticInput or a memory with a "
                         "boot_layer to know the number of samples")

    def forward(self, pass_type: str) -> None:
        self.pass_type = pass_type
        g = self.gen
        beam, eos, max_len = int(g["beam_size"]), int(g["eos_id"]), int(g["max_length"])
        self.batch_statics = self.statics
        n = self._num_samples()
        samples = np.arange(n)
        scores = np.zeros(n)
        ids = np.full(n, int(g["bos_id"]), dtype=np.int64)
        parents = samples
        hist_ids: list[np.ndarray] = []
        hist_parents: list[np.ndarray] = []
        finals = _Finals(n)
        boots = [self._boot(m, samples, n) for m in self.memories]
        for t in range(max_len):
            if samples.size == 0:
                break
            net, prev = self.frame(t % 2), self.frames[(t + 1) % 2] if t else None
            sources = [(s["agent"], self.get_input(s["input"]), samples)
                       for s in self.batch_statics]
            if prev is not None:
                sources += [(m["agent"], prev.layers[m["link"]].output, parents)
                            for m in self.memories]
            picks = [_rows(arg, rows) for _, arg, rows in sources]
            sent = _on_device([ids, *(rows for rows, _ in picks)])
            agent = net.layers[g["agent"]].output
            _set(agent, None, sent[0], None)
            if sent[0] is not ids:
                agent.mark_host_ids(ids)
                if ids.size and ids.min() >= 0:
                    agent.mark_ids_below(int(ids.max()) + 1)
            for (name, arg, _), (rows, starts), device_rows in zip(sources, picks, sent[1:]):
                value = None if arg.value is None else arg.value[_like(arg.value, rows,
                                                                       device_rows)]
                mid = None if arg.ids is None else arg.ids[_like(arg.ids, rows, device_rows)]
                _set(net.layers[name].output, value, mid, starts)
            if prev is None:
                for m, (value, mid, starts) in zip(self.memories, boots):
                    _set(net.layers[m["agent"]].output, value, mid, starts)
            net.run_forward(PASS_TEST)
            probs = net.layers[g["prob_layer"]].output.value
            cand_parent, cand_ids, cand_score = self._expand(probs, scores, beam)
            cand_sample = samples[cand_parent]
            done = (cand_ids == eos) | (t + 1 >= max_len)
            finals.add(cand_sample[done], cand_score[done], t, cand_parent[done], cand_ids[done])
            live = np.flatnonzero(~done)
            order = live[np.lexsort((-cand_score[live], cand_sample[live]))]
            sorted_samples = cand_sample[order]
            rank = np.arange(order.size) - np.searchsorted(sorted_samples, sorted_samples)
            keep = order[rank < beam]
            keep = keep[finals.shrink(cand_sample[keep], cand_score[keep], beam)]
            samples, scores = cand_sample[keep], cand_score[keep]
            ids, parents = cand_ids[keep], cand_parent[keep]
            hist_ids.append(ids)
            hist_parents.append(parents)
        self._emit(finals, hist_ids, hist_parents, n)

    @staticmethod
    def _expand(probs, scores, beam: int):
        """(parent, id, score) of every candidate: each path's ``min(beam, V)`` best ids. The
        beams' bookkeeping is on the host. On the GPU each path's best ids are chosen there
        (a stable sort: ties go to the lower id) and only they and their log-probabilities
        come back, in one copy: ``paths x beam`` numbers instead of ``paths x V``."""
        xp = get_array_module(probs)
        logp = xp.log(xp.maximum(probs, TINY))
        k = min(beam, logp.shape[1])
        parent = np.repeat(np.arange(logp.shape[0]), k)
        if xp is not np:
            top = xp.argsort(-logp, axis=1)[:, :k]
            picked = xp.take_along_axis(logp, top, axis=1)
            both = to_numpy(xp.stack([top.astype(np.float64), picked.astype(np.float64)]))
            cand = both[0].reshape(-1).astype(np.int64)
            return parent, cand, scores[parent] + both[1].reshape(-1)
        if k == 1:
            top = logp.argmax(axis=1)[:, None]
        else:
            top = np.argpartition(-logp, k - 1, axis=1)[:, :k]
        cand = top.reshape(-1)
        return parent, cand, scores[parent] + logp[parent, cand]

    def _emit(self, finals: _Finals, hist_ids, hist_parents, n: int) -> None:
        r = int(self.gen["num_results"])
        prob = np.full((n, r), -np.inf)
        pieces: list[list[int]] = []
        starts = [0]
        for s, best in enumerate(finals.best(r)):
            if not best and r == 1:
                raise ValueError(f"beam_search {self.group!r}: sample {s} ended with no path")
            out: list[int] = []
            for j, (score, t, parent, last) in enumerate(best):
                prob[s, j] = score
                path = [last]
                for step in range(t - 1, -1, -1):
                    path.append(int(hist_ids[step][parent]))
                    parent = int(hist_parents[step][parent])
                path.reverse()
                out.extend(path if r == 1 else [len(path), *path, -1])
            pieces.append(out)
            starts.append(starts[-1] + len(out))
        self.output.value = prob
        self.output.ids = np.fromiter((i for p in pieces for i in p), dtype=np.int64,
                                      count=starts[-1])
        self.output.seq_starts = np.asarray(starts, dtype=np.int64)
        self.output.sub_seq_starts = None
        self.output.grad = None

    def backward(self, callback=None) -> None:
        """Generation has no gradient."""


def _rows(src: Argument, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(host rows, seq_starts) of ``src`` for the paths or samples ``picks``: row ``picks[i]``,
    or for a sequence (a static input's, a sequence-valued memory's: an external memory read
    and written every step) the whole sequence ``picks[i]``, with its new starts."""
    if src.seq_starts is None:
        return picks, None
    return sequence_rows(src.seq_starts, picks)


def _on_device(indices: list[np.ndarray]) -> list:
    """A step's host index arrays (ids, rows) as they are on the CPU; on the GPU all sent in
    one asynchronous copy, so that gathering the beams' states there waits for nothing."""
    return to_gpu_together(indices) if gpu_enabled() else indices


def _like(x, host, device):
    """The index array to gather ``x`` with: ``device``'s copy for a device ``x``."""
    return device if is_gpu_array(x) else host


class _Finals:
    """The finished paths of every sample, as arrays (sample, score, step, parent, last id),
    with PaddlePaddle's pruning (``RecurrentGradientMachine::beamShrink``)."""

    def __init__(self, num_samples: int):
        self.sample = np.zeros(0, dtype=np.int64)
        self.score = np.zeros(0)
        self.step = np.zeros(0, dtype=np.int64)
        self.parent = np.zeros(0, dtype=np.int64)
        self.last = np.zeros(0, dtype=np.int64)
        self.min_score = np.zeros(num_samples)  # PaddlePaddle starts it at 0

    def add(self, sample, score, t: int, parent, last) -> None:
        self.sample = np.concatenate([self.sample, sample])
        self.score = np.concatenate([self.score, score])
        self.step = np.concatenate([self.step, np.full(sample.size, t, dtype=np.int64)])
        self.parent = np.concatenate([self.parent, parent])
        self.last = np.concatenate([self.last, last])

    def shrink(self, samples, scores, beam: int):
        """Prune with the kept live paths (``samples``, ``scores``): a sample's finished paths
        scoring below its worst live path are dropped; when it then has ``beam`` finished paths
        none of which scores below its best live path, its live paths are dropped. Returns the
        mask of live paths to keep."""
        n = self.min_score.size
        has_live = np.zeros(n, dtype=bool)
        has_live[samples] = True
        worst = np.full(n, np.inf)
        best = np.full(n, -np.inf)
        np.minimum.at(worst, samples, scores)
        np.maximum.at(best, samples, scores)
        keep = ~(has_live[self.sample] & (self.score < worst[self.sample]))
        for name in ("sample", "score", "step", "parent", "last"):
            setattr(self, name, getattr(self, name)[keep])
        touched = has_live[self.sample]
        np.minimum.at(self.min_score, self.sample[touched], self.score[touched])
        count = np.bincount(self.sample, minlength=n)
        done = has_live & (count >= beam) & (self.min_score >= best)
        return ~done[samples]

    def best(self, r: int):
        """Per sample its ``r`` best finished paths, best first: (score, step, parent, id)."""
        order = np.lexsort((-self.score, self.sample))
        out: list[list[tuple[float, int, int, int]]] = [[] for _ in range(self.min_score.size)]
        for i in order:
            s = int(self.sample[i])
            if len(out[s]) < r:
                out[s].append((float(self.score[i]), int(self.step[i]), int(self.parent[i]),
                               int(self.last[i])))
        return out
