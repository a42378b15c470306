"""The v2 trainer (``paddle.v2.trainer``): a plain loop over batches that sends typed events.

Per batch: convert with the DataFeeder, forward, backward (the gradient reaching parameters is
the SUM over the batch), ``EndForwardBackward``, one ``optimizer.update`` per parameter whose
gradient is complete (not static, not immutable; sparse-update parameters pass the touched
rows), ``optimizer.finish_batch(n)``, then ``EndIteration`` with the batch MEAN cost
(sum of per-sample costs / samples) and the batch's metrics. ``EndPass`` carries the pass's
metrics.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from sculler import event as E
from sculler.backend import to_numpy
from sculler.core.evaluator import create_evaluator, metrics_of
from sculler.core.layer import PASS_TEST, PASS_TRAIN
from sculler.core.nan_guard import NonFiniteError, locate_forward
from sculler.core.network import Network
from sculler.core.parameter import Parameter
from sculler.data_feeder import DataFeeder
from sculler.fileio import (
    CHECKPOINT_FORMAT,
    SAVE_FORMAT,
    FileFormatError,
    atomic_write,
    check_input_path,
    open_safetensors,
)
from sculler.optimizer import Momentum, Optimizer
from sculler.parameters import Parameters, training_topology
from sculler.validate import as_array, exact_shape, integer, iterate_reader, require_reader

__all__ = ["SGD", "TrainingInterrupted", "train", "default_event_handler"]


def default_event_handler(event: Any) -> None:
    """PaddlePaddle's default handler: it ignores every event (as ``train`` does when no
    ``event_handler`` is given)."""


class TrainingInterrupted(SystemExit):
    """Ctrl-C (KeyboardInterrupt) during :meth:`SGD.train`. A ``SystemExit`` (exit status
    130, as a shell reports SIGINT) so that a script ends with the one line
    :meth:`SGD.train` printed, not a traceback; a program that wants to go on catches it.
    ``next_pass``/``next_batch``: where a resume starts; ``checkpoint``: the file it starts
    from (None: training was not checkpointed)."""

    def __init__(self, message: str, next_pass: int, next_batch: int,
                 checkpoint: str | None) -> None:
        super().__init__(130)
        self.message = message
        self.next_pass, self.next_batch, self.checkpoint = next_pass, next_batch, checkpoint

    def __str__(self) -> str:
        return self.message


def _evaluated_once(batch_ev, pass_ev) -> bool:
    """Whether a batch's evaluation is done once and merged into the pass's evaluator: its
    state adds up (``Evaluator.additive``) and both are of one type."""
    return batch_ev.additive and type(pass_ev) is type(batch_ev)


def _read_with_cost(network, evaluators: list) -> tuple[float, dict[int, tuple]]:
    """The batch's cost sum and, for each of ``evaluators`` that counts on the GPU
    (:meth:`Evaluator.device_sums`), ``id -> (host sums, extra)`` for ``add_sums``: all read
    back in one transfer."""
    layers = network.layers
    pending = []
    for ev in evaluators:
        sums = ev.device_sums(layers)
        if sums is not None:
            pending.append((ev, sums))
    cost_sum, read = network.total_cost_and([sums[0] for _, sums in pending])
    return cost_sum, {id(ev): (host, sums[1]) for (ev, sums), host in zip(pending, read)}


class SGD:
    """Trains the topology of ``cost`` (+ ``extra_layers``) on ``parameters`` with the
    optimizer ``update_equation``. ``is_local=False`` trains on a Ray cluster
    (:func:`sculler.distributed.train_sgd`; ``pserver_spec`` is the Ray address)."""

    def __init__(self, cost: Any, parameters: Parameters, update_equation: Optimizer,
                 extra_layers: Any = None, is_local: bool = True, pserver_spec: Any = None,
                 use_etcd: bool = True):
        self.is_local = is_local and pserver_spec is None
        self.pserver_spec = pserver_spec
        self.topology = training_topology(cost, parameters, update_equation, extra_layers)
        self.parameters = parameters
        self.optimizer = update_equation
        mc = self.topology.proto()
        self.network = Network(mc, parameters.parameter_set)
        # dense parameters in one buffer: the optimizer updates them in a few flat passes
        parameters.parameter_set.pack(self.network.used_parameters)
        self._batch_evals = [create_evaluator(e) for e in mc.evaluators]
        self._device_sums: dict[int, tuple] = {}  # read with a batch's cost
        self._pass_evals = self.network.evaluators
        self._cost_names = [layer.name for layer in self.network.cost_layers()]
        if not self._cost_names:
            raise ValueError(f"none of the output layers {mc.output_layer_names} is a cost "
                             "layer; SGD needs a cost to minimise")
        self._ready: list[Parameter] = []
        self._next_pass = 0
        self._next_batch = 0
        self._resume = False
        self._last_backward: tuple[int, int] | None = None  # (pass, batch), for the NaN guard
        self._batches_per_pass: int | None = None
        self._updating = False  # parameters are half-updated: no checkpoint can be taken
        self._saved_at: tuple[int, int] | None = None  # (pass, batch) the checkpoint resumes at

    def get_topology_proto(self) -> Any:
        """The ModelConfig being trained (PaddlePaddle returns its protobuf)."""
        return self.topology.proto()

    # ------------------------------------------------------------------ training
    def train(self, reader: Callable[[], Iterable[Any]], num_passes: int = 1,
              event_handler: Callable[[Any], None] | list | None = None, feeding: Any = None,
              immutable_parameters: Iterable[str] | None = None,
              show_progress: bool | None = None, checkpoint: str | None = None) -> None:
        """Run passes ``0 .. num_passes-1`` over the batches of ``reader`` (after
        :meth:`load_checkpoint`, from the checkpoint's pass and batch instead).

        ``immutable_parameters`` are names not updated (their gradients are still computed
        where needed). ``checkpoint``: a path; resumed from when it exists, rewritten
        (atomically) at the end of every pass. ``show_progress``: a tqdm bar per pass
        (default: when stderr is a terminal). ``event_handler``: a callable or a list of
        them, called in order with every event.

        Ctrl-C (KeyboardInterrupt, also one raised by an event handler) prints one line
        saying where a resume starts and how, and raises :class:`TrainingInterrupted` (a
        ``SystemExit``: no traceback). With ``checkpoint``, the state after the last finished
        batch is saved first, so a resume (the same call again) starts at the next batch.
        """
        handler = E.as_handler(event_handler)
        require_reader(reader, "train(reader=...)")
        num_passes = integer(num_passes, "train(num_passes=...)", minimum=0)
        if not self.is_local:
            from sculler.distributed import train_sgd

            train_sgd(self, reader, num_passes, handler, feeding, immutable_parameters)
            return
        feeder = DataFeeder(self.topology.data_type(), feeding, reuse_buffers=True)
        frozen = set(immutable_parameters or ())
        unknown = frozen - set(self.parameters.names())
        if unknown:
            raise ValueError(f"immutable_parameters {sorted(unknown)} are not parameters of "
                             f"this model; parameters are {self.parameters.names()}")
        if checkpoint is not None and os.path.isdir(checkpoint):
            raise IsADirectoryError(f"train: checkpoint {checkpoint!r} is a directory; pass "
                                    "a file path such as 'model.ckpt'")
        if checkpoint is not None and os.path.exists(checkpoint):
            self.load_checkpoint(checkpoint)
        if show_progress is None:
            show_progress = sys.stderr.isatty()
        if not self._resume:
            self._next_pass = self._next_batch = 0
        self._resume = False
        self._last_backward = None
        average = self.optimizer.model_average
        if average is not None:
            average.restore()  # train on the raw values
        handler(E.BeginTraining())
        try:
            for pass_id in range(self._next_pass, num_passes):
                self._run_pass(pass_id, reader, feeder, handler, frozen, show_progress)
                if checkpoint is not None:
                    self.save_checkpoint(checkpoint)
        except KeyboardInterrupt:
            raise self._interrupted(checkpoint) from None
        if average is not None:
            average.apply()  # infer / to_tar after training see the averaged parameters
        handler(E.EndTraining())

    def _interrupted(self, checkpoint: str | None) -> TrainingInterrupted:
        """Print where a resume starts (saving ``checkpoint`` first unless the parameters
        are half-updated) and return the exception that ends training."""
        at = f"pass {self._next_pass}, batch {self._next_batch}"
        if checkpoint is not None and not self._updating:
            self.save_checkpoint(checkpoint)
        self._updating = False
        if checkpoint is None or self._saved_at is None:
            how = ("nothing was checkpointed; pass checkpoint=PATH to train() (sculler train "
                   "--checkpoint PATH) to make a run resumable")
            message = f"training interrupted before {at}; {how}"
            resume = (0, 0)
        else:
            resume = self._saved_at
            message = (f"training interrupted before {at}; to resume at pass {resume[0]}, "
                       f"batch {resume[1]}, run the same train(..., checkpoint={checkpoint!r}) "
                       f"or sculler train --checkpoint {checkpoint} again")
        print(message, file=sys.stderr, flush=True)
        return TrainingInterrupted(message, *resume, checkpoint)

    def _run_pass(self, pass_id: int, reader: Callable, feeder: DataFeeder, handler: Callable,
                  frozen: set[str], show_progress: bool) -> None:
        handler(E.BeginPass(pass_id))
        self.optimizer.start_pass(pass_id)
        for ev in self._pass_evals:
            ev.start()
        batches = iterate_reader(reader, "train(reader=...)")
        skip = self._next_batch
        bar = None
        if show_progress:
            from tqdm import tqdm

            # total (hence ETA): the reader's len, else the batches of the last full pass
            total = len(batches) if hasattr(batches, "__len__") else self._batches_per_pass
            bar = tqdm(desc=f"pass {pass_id}", unit="batch", total=total, initial=skip,
                       leave=False)
        total_cost = 0.0
        samples = 0
        # with no handler and no progress bar nobody reads the per-batch events and metrics:
        # they are not built (the pass's evaluators still see every batch)
        report = handler is not E._ignore or bar is not None
        try:
            for batch_id, data_batch in enumerate(batches):
                if batch_id < skip:
                    continue
                if report:
                    handler(E.BeginIteration(pass_id, batch_id))
                cost_sum = self._forward_backward(feeder.convert(data_batch), pass_id, batch_id)
                if report:
                    handler(E.EndForwardBackward(pass_id, batch_id))
                n = len(data_batch)
                self._updating = True
                self._update(frozen)
                self.optimizer.finish_batch(n)
                self._next_batch = batch_id + 1
                self._updating = False
                metrics = self._eval_batch(report)
                total_cost += cost_sum
                samples += n
                if not report:
                    continue
                cost = cost_sum / n
                if bar is not None:
                    shown = {k: f"{v:.4g}" for k, v in metrics.items()}
                    bar.set_postfix(cost=f"{cost:.5g}", **shown, refresh=False)
                    bar.update(1)
                handler(E.EndIteration(pass_id, batch_id, cost, metrics))
        finally:
            if bar is not None:
                bar.close()
        if skip == 0:
            self._batches_per_pass = self._next_batch
        self._next_pass, self._next_batch = pass_id + 1, 0
        self.optimizer.finish_pass()
        metrics = metrics_of(self._pass_evals)
        import logging  # (loaded at the first pass's end, not with sculler)

        logging.getLogger("sculler.trainer").info(
            "pass %d: %d samples, mean cost %.6g, %s", pass_id, samples,
            total_cost / max(samples, 1), metrics)
        with self._averaged():
            handler(E.EndPass(pass_id, metrics))

    def _forward_backward(self, args: dict, pass_id: int, batch_id: int) -> float:
        net = self.network
        net.forward(args, PASS_TRAIN)
        cost_sum = self._read_cost_and_device_sums()
        if not math.isfinite(cost_sum):  # the previous backward's gradients are still there
            raise NonFiniteError(locate_forward(net, pass_id, batch_id, self._last_backward))
        net.zero_grad()
        self._ready.clear()
        net.backward(self._ready.append)
        self._last_backward = (pass_id, batch_id)
        return cost_sum

    def _read_cost_and_device_sums(self) -> float:
        """The batch's cost sum; on the GPU the additive evaluators that count there come
        back in the same transfer (:func:`_read_with_cost`), kept for :meth:`_eval_batch`."""
        once = [bev for bev, pev in zip(self._batch_evals, self._pass_evals)
                if _evaluated_once(bev, pev)]
        cost_sum, self._device_sums = _read_with_cost(self.network, once)
        return cost_sum

    def _update(self, frozen: set[str]) -> None:
        opt = self.optimizer
        dense = []
        for p in self._ready:
            if p.name in frozen or p.config.is_static:
                continue
            grad = p.grad  # (a property: read once)
            if grad is None:
                continue
            if p.config.sparse_update:
                rows = p.touched_rows_array()
                if rows.size:
                    opt.update(p.name, p.value, grad[rows], config=p.config, rows=rows)
            else:
                dense.append((p.name, p.value, grad, p.config))
        opt.update_dense(dense)

    def _eval_batch(self, report: bool = True) -> dict[str, float] | None:
        """Add the batch to the pass's evaluators; the batch's own metrics come from a second
        set restarted every batch (printing evaluators run once), returned when ``report``."""
        layers = self.network.layers
        for bev, pev in zip(self._batch_evals, self._pass_evals):
            if _evaluated_once(bev, pev):  # evaluate once, add to the pass
                bev.start()
                read = self._device_sums.pop(id(bev), None)
                if read is None:
                    bev.eval_batch(layers)
                else:
                    bev.add_sums(*read)
                pev.merge(bev)
                continue
            pev.eval_batch(layers)
            if report and bev.reports_value:
                bev.start()
                bev.eval_batch(layers)
        return metrics_of(self._batch_evals) if report else None

    # ------------------------------------------------------------------ testing
    def _averaged(self) -> contextlib.AbstractContextManager:
        """The optimizer's ModelAverage values in the parameters for the ``with`` block."""
        average = self.optimizer.model_average
        return average.averaged() if average is not None else contextlib.nullcontext()

    def test(self, reader: Callable[[], Iterable[Any]], feeding: Any = None) -> E.TestResult:
        """Mean cost (total / samples) and metrics over ``reader``'s batches, in test mode
        (with the averaged parameters when the optimizer has a ModelAverage)."""
        with self._averaged():
            return self._test(reader, feeding)

    def _test(self, reader: Callable[[], Iterable[Any]], feeding: Any) -> E.TestResult:
        feeder = DataFeeder(self.topology.data_type(), feeding)
        evals = [create_evaluator(e) for e in self.topology.proto().evaluators]
        total, samples = 0.0, 0
        for data_batch in iterate_reader(require_reader(reader, "test(reader=...)"),
                                         "test(reader=...)"):
            self.network.forward(feeder.convert(data_batch), PASS_TEST)
            cost_sum, read = _read_with_cost(self.network, [e for e in evals if e.additive])
            total += cost_sum
            samples += len(data_batch)
            for ev in evals:
                if id(ev) in read:
                    ev.add_sums(*read[id(ev)])
                else:
                    ev.eval_batch(self.network.layers)
        if samples == 0:
            raise ValueError("test reader yielded no samples")
        return E.TestResult(total / samples, metrics_of(evals))

    def save_parameter_to_tar(self, f: Any) -> None:
        """The parameters in PaddlePaddle's tar format (averaged ones with a ModelAverage)."""
        with self._averaged():
            self.parameters.to_tar(f)

    # ------------------------------------------------------------------ checkpoints
    @property
    def next_pass(self) -> int:
        return self._next_pass

    def save_checkpoint(self, path: str) -> None:
        """Parameters, optimizer state, pass/batch counters and RNG states in one safetensors
        file (JSON metadata), written atomically (:func:`sculler.fileio.atomic_write`)."""
        from safetensors.numpy import save as safetensors_bytes

        average = self.optimizer.model_average
        applied = average is not None and average.applied
        if applied:
            average.restore()  # checkpoint the raw training values
        tensors = {f"param/{n}": np.ascontiguousarray(self.parameters.get(n))
                   for n in self.parameters.names()}
        if applied:
            average.apply()
        for k, v in self.optimizer.state_dict().items():
            tensors[f"opt/{k}"] = np.array(to_numpy(v), order="C")
        rng = {"global": np.random.get_state()}
        rng.update({f"layer/{name}": layer._rng.get_state()
                    for name, layer in self.network.layers.items()})
        meta: dict[str, Any] = {"format": CHECKPOINT_FORMAT, "next_pass": self._next_pass,
                                "next_batch": self._next_batch, "rng": {}}
        for key, (kind, keys, pos, has_gauss, gauss) in rng.items():
            tensors[f"rng/{key}"] = keys
            meta["rng"][key] = [kind, pos, has_gauss, gauss]
        version, internal, gauss_next = random.getstate()
        tensors["rng/python"] = np.asarray(internal, dtype=np.uint64)
        meta["python_rng"] = [version, gauss_next]
        import json
        blob = safetensors_bytes(tensors, metadata={"sculler": json.dumps(meta)})
        atomic_write(path, lambda stream: stream.write(blob), "save_checkpoint")
        self._saved_at = (self._next_pass, self._next_batch)

    def load_checkpoint(self, path: str) -> None:
        """Restore what :meth:`save_checkpoint` wrote; training then continues where it
        stopped (bit-identical at pass boundaries). A file of ``sculler.save``, a foreign or
        damaged file, or a checkpoint of another model is an error naming the file."""
        path = check_input_path(path, "load_checkpoint")
        meta, f = open_safetensors(path, "load_checkpoint")
        with f:
            fmt = meta.get("format", CHECKPOINT_FORMAT if "next_pass" in meta else None)
            if fmt != CHECKPOINT_FORMAT:
                kind = ("a file written by sculler.save (load it with sculler.load)"
                        if fmt == SAVE_FORMAT else "a safetensors file not written by Sculler")
                raise FileFormatError(f"load_checkpoint: {path!r} is {kind}, not a trainer "
                                      "checkpoint (SGD.save_checkpoint)")
            try:
                tensors = {k: f.get_tensor(k) for k in f.keys()}
            except Exception as e:  # SafetensorError: data cut short
                raise FileFormatError(f"load_checkpoint: {path!r} is damaged "
                                      f"({type(e).__name__}: {e})") from e
        params = {k[6:]: v for k, v in tensors.items() if k.startswith("param/")}
        foreign = sorted(set(params) - set(self.parameters.names()))
        missing = sorted(set(self.parameters.names()) - set(params))
        if foreign or missing:
            raise ValueError(f"load_checkpoint: {path!r} is a checkpoint of another model: "
                             f"parameters {foreign} are not in this model, {missing} are not "
                             "in the checkpoint")
        try:
            checked = self._checked_checkpoint(meta, tensors, params)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise FileFormatError(f"load_checkpoint: {path!r} is damaged or of another "
                                  f"model ({type(e).__name__}: {e})") from e
        # everything is checked: from here on nothing can fail half-way
        if self.optimizer.model_average is not None:
            self.optimizer.model_average.restore()
        self._apply_checkpoint(*checked)
        self._resume = True

    def _checked_checkpoint(self, meta: dict, tensors: dict, params: dict) -> tuple:
        """Every value a checkpoint restores, checked and converted; nothing applied yet (a
        damaged entry found late must not leave the parameters half overwritten)."""
        values = {name: exact_shape(as_array(v, f"checkpoint parameter {name!r}"),
                                    self.parameters.get_shape(name), f"parameter {name!r}",
                                    allow_flat=True)
                  for name, v in params.items()}
        opt = self.optimizer.checked_state(
            {k[4:]: v for k, v in tensors.items() if k.startswith("opt/")})
        rng = {}
        if not isinstance(meta.get("rng"), dict):
            raise ValueError(f"the random states are {type(meta.get('rng')).__name__}, not a "
                             "mapping")
        for key, (kind, pos, has_gauss, gauss) in meta["rng"].items():
            state = (kind, tensors[f"rng/{key}"], int(pos), int(has_gauss), float(gauss))
            np.random.RandomState().set_state(state)  # raises on a damaged state
            if key == "global" or key[6:] in self.network.layers:
                rng[key] = state
        version, gauss_next = meta["python_rng"]
        python_rng = (version, tuple(int(v) for v in tensors["rng/python"]), gauss_next)
        random.Random().setstate(python_rng)  # raises on a damaged state
        counters = int(meta["next_pass"]), int(meta["next_batch"])
        if min(counters) < 0:
            raise ValueError(f"negative pass/batch counters {counters}")
        return values, opt, rng, python_rng, counters

    def _apply_checkpoint(self, values: dict, opt: tuple, rng: dict, python_rng: tuple,
                          counters: tuple) -> None:
        for name, v in values.items():
            self.parameters.set(name, v)
        self.optimizer.apply_state(opt)
        for key, state in rng.items():
            if key == "global":
                np.random.set_state(state)
            else:
                self.network.layers[key[6:]]._rng.set_state(state)
        random.setstate(python_rng)
        self._next_pass, self._next_batch = counters
        self._saved_at = counters


def train(topology: Any, parameters: Parameters, reader: Callable[[], Iterable[Any]],
          event_handler: Callable[[Any], None] | list | None = None,
          immutable_parameters: Iterable[str] | None = None, num_passes: int = 1,
          feeding: Any = None, update_equation: Optimizer | None = None,
          **kwargs: Any) -> SGD:
    """``paddle.train`` shorthand of the design doc: ``SGD(topology, parameters,
    update_equation).train(reader, ...)``. The default optimizer is
    ``Momentum(momentum=0.9, learning_rate=1e-3)`` (gradients are batch sums, so this suits
    batches of tens to hundreds). Returns the trainer (for ``test``/checkpoints)."""
    opt = update_equation or Momentum(momentum=0.9, learning_rate=1e-3)
    trainer = SGD(topology, parameters, opt)
    trainer.train(reader, num_passes=num_passes, event_handler=event_handler, feeding=feeding,
                  immutable_parameters=immutable_parameters, **kwargs)
    return trainer
