"""A trainer: computes one batch's gradients against parameters pulled from the shards.

Per call of :meth:`TrainerWorker.compute`: ask the master for the next batch, read it from
the reader, pull the dense parameters and only the rows of sparse tables the batch touches
(``Network.prefetch()``), forward and backward, and return the batch's metrics plus one push
per shard holding the dense gradients it owns and the touched rows' gradients only.

A sparse table never exists whole here. The local network holds it as a small table of
``capacity`` rows (grown by doubling when a batch needs more): the batch's unique rows are
copied to local rows ``0 .. k-1`` and the ids fed to the table are remapped to those local
rows (PaddlePaddle's ``getLocalRow``).
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from sculler import backend
from sculler.backend import to_numpy
from sculler.core.evaluator import create_evaluator
from sculler.core.layer import PASS_TRAIN
from sculler.core.model_config import ModelConfig
from sculler.core.network import Network
from sculler.core.parameter import Parameter, ParameterSet
from sculler.data_feeder import DataFeeder
from sculler.distributed.rpc import call, call_all
from sculler.distributed.sharding import ShardMap
from sculler.math.sparse import CsrMatrix


def sparse_inputs(config: ModelConfig, sparse: list[str]) -> dict[str, str]:
    """Data layer -> sparse table it feeds; NotImplementedError for other layouts."""
    layers = {lc.name: lc for lc in config.layers}
    fed: dict[str, str] = {}
    for lc in config.layers:
        for ic in lc.inputs:
            if ic.input_parameter_name not in sparse:
                continue
            src = layers[ic.input_layer_name]
            if src.type != "data":
                raise NotImplementedError(
                    f"distributed sparse table {ic.input_parameter_name!r}: layer {lc.name!r} "
                    f"reads it with input {src.name!r} of type {src.type!r}; only data layers "
                    "(ids or sparse vectors) can feed a sparse table remotely")
            if src.attrs.get("kind") not in ("ids", "sparse_binary", "sparse_float") or \
                    ic.attrs.get("proj") == "trans_full_matrix":
                raise NotImplementedError(
                    f"distributed sparse table {ic.input_parameter_name!r}: layer {lc.name!r} "
                    f"reads it from data layer {src.name!r} (kind "
                    f"{src.attrs.get('kind')!r}, projection {ic.attrs.get('proj')!r}); only "
                    "ids, or a sparse vector whose columns name the table's rows, can fetch "
                    "the rows a batch touches")
            if fed.setdefault(src.name, ic.input_parameter_name) != ic.input_parameter_name:
                raise NotImplementedError(f"data layer {src.name!r} feeds two sparse tables; "
                                          "distributed training supports one per data layer")
    for lc in config.layers:
        for ic in lc.inputs:
            if ic.input_layer_name in fed and ic.input_parameter_name not in sparse:
                raise NotImplementedError(
                    f"data layer {ic.input_layer_name!r} feeds sparse table "
                    f"{fed[ic.input_layer_name]!r} and also layer {lc.name!r}; distributed "
                    "training needs it to feed only sparse tables")
    return fed


class TrainerWorker:
    """Trainer ``trainer_id``: a local network over pulled parameters.

    Args:
        trainer_id: its index (pushes are numbered per trainer).
        config: the model (the trainer's copy shrinks sparse tables to ``capacity`` rows).
        data_types: ``Topology.data_type()``, for the DataFeeder.
        feeding: the DataFeeder's feeding.
        reader: the batch reader (a callable returning an iterable of batches).
        shard_map: parameter placement.
        shards, master: actor handles.
        frozen: names of parameters not updated.
        rpc_timeout_s: deadline of every remote call.
        capacity: initial rows of a local sparse table.
        use_gpu: compute on this process's GPU (CuPy); values come from and gradients go to
            the parameter servers as host arrays.
    """

    def __init__(self, trainer_id: int, config: ModelConfig, data_types: Any, feeding: Any,
                 reader: Callable[[], Iterable[Any]], shard_map: ShardMap, shards: list[Any],
                 master: Any, frozen: Iterable[str] = (), rpc_timeout_s: float = 60.0,
                 capacity: int = 1024, use_gpu: bool = False) -> None:
        if use_gpu:
            backend.use_gpu(True)  # raises naming what is missing on this node
        self.trainer_id = trainer_id
        self.base_config = config
        self.feeder = DataFeeder(data_types, feeding, reuse_buffers=True)
        self.reader = reader
        self.map = shard_map
        self.shards = shards
        self.master = master
        self.frozen = set(frozen)
        self.timeout = float(rpc_timeout_s)
        self.fed = sparse_inputs(config, shard_map.sparse)
        self.seq = 0
        self._cursor: tuple[int, int, int, Any] | None = None
        self._build(max(1, int(capacity)))

    def _build(self, capacity: int) -> None:
        cfg = copy.deepcopy(self.base_config)
        for pc in cfg.parameters:
            if pc.name in self.map.sparse:
                pc.dims = [capacity, pc.dims[1]]
                pc.sparse_remote_update = True
        for lc in cfg.layers:
            if lc.name in self.fed and lc.attrs.get("kind") in ("sparse_binary", "sparse_float"):
                lc.size = capacity  # a sparse-vector input is remapped to local columns
        self.capacity = capacity
        self.network = Network(cfg, ParameterSet(seed=0))
        self._evals = [create_evaluator(e) for e in cfg.evaluators]
        self._ready: list[Parameter] = []

    def start_seq(self, last_seq: int) -> int:
        """Number the next pushes after ``last_seq`` (the highest the shards have applied
        from this trainer id, e.g. in a run being resumed); returns the process id."""
        self.seq = max(self.seq, int(last_seq))
        return os.getpid()

    # ------------------------------------------------------------------ data
    def _batch(self, pass_id: int, task_id: int, index: int) -> Any:
        """Batch ``index`` of pass ``pass_id``; reads on from the last one when it can."""
        cur = self._cursor
        if cur is not None and cur[:3] == (pass_id, task_id, index):
            it = cur[3]
        else:
            it = itertools.islice(iter(self.reader()), index, None)
        try:
            batch = next(it)
        except StopIteration:
            raise ValueError(f"trainer {self.trainer_id}: the reader ended before batch "
                             f"{index}; the reader must yield the same batches every pass"
                             ) from None
        self._cursor = (pass_id, task_id, index + 1, it)
        return batch

    # ------------------------------------------------------------------ one batch
    def compute(self, pass_id: int) -> tuple[Any, ...]:
        """Gradients of the next batch: ``(meta, push_0, ..., push_{n-1})``; ``meta`` is
        ``{"batch": None}`` when the master has nothing to hand out."""
        got = call("master", self.master.next_batch, self.trainer_id,
                   timeout_s=self.timeout)
        n = self.map.num_shards
        if got is None:
            return ({"batch": None, "trainer": self.trainer_id},) + (None,) * n
        task_id, index = got
        data = self._batch(pass_id, task_id, index)
        args = self.feeder.convert(data)
        rows = self._prefetch(args)
        need = max((r.size for r in rows.values()), default=0)
        if need > self.capacity:
            self._build(max(need, 2 * self.capacity))
            rows = self._prefetch(args)
        net = self.network
        versions, pulled = self._pull(rows)
        args = self._remap(args, rows)
        net.zero_grad()
        net.forward(args, PASS_TRAIN)
        cost = net.total_cost()
        self._ready.clear()
        net.backward(self._ready.append)
        pushes = self._pushes(rows, versions, len(data))
        for ev in self._evals:
            ev.start()
            ev.eval_batch(net.layers)
        pushed = sum(_nbytes(p) for p in pushes)
        meta = {"batch": index, "task": task_id, "trainer": self.trainer_id,
                "cost_sum": cost, "samples": len(data), "evaluators": self._evals,
                "pulled_bytes": pulled, "pushed_bytes": pushed, "seq": self.seq}
        return (meta, *pushes)

    def _prefetch(self, args: dict[str, Any]) -> dict[str, np.ndarray]:
        """Global rows of each sparse table the batch touches (``Network.prefetch()`` on the
        batch as fed, before its ids are remapped to local rows)."""
        for d in self.network.data_layers:
            arg = args[d.name]
            d.output.value, d.output.ids = arg.value, arg.ids
        return self.network.prefetch()

    def _pull(self, rows: dict[str, np.ndarray]) -> tuple[list[int], int]:
        """Fetch dense values and the touched rows into the local network."""
        n = self.map.num_shards
        splits = {name: self.map.split_rows(r) for name, r in rows.items()}
        calls = []
        for s in range(n):
            want = {name: splits[name][s][1] for name in rows}
            calls.append((f"pserver {s}", self.shards[s].pull, (self.map.dense_on(s), want)))
        replies = call_all(calls, self.timeout)
        params = self.network.parameters
        nbytes = 0
        versions = []
        for s, (version, dense, sparse) in enumerate(replies):
            versions.append(version)
            for name, value in dense.items():
                params[name].value[...] = backend.to_device(value)
                nbytes += value.nbytes
            for name, part in sparse.items():
                params[name].value[splits[name][s][0]] = backend.to_device(part)
                nbytes += part.nbytes
        return versions, nbytes

    def _remap(self, args: dict[str, Any], rows: dict[str, np.ndarray]) -> dict[str, Any]:
        """Replace global table rows in the data fed to sparse tables by local rows."""
        out = dict(args)
        for data_name, table in self.fed.items():
            arg = copy.copy(args[data_name])
            table_rows = rows[table]
            if arg.ids is not None:
                arg.ids = np.searchsorted(table_rows, arg.ids)
            else:
                m = arg.value
                arg.value = CsrMatrix(m.indptr, np.searchsorted(table_rows, m.indices),
                                      m.data, (m.shape[0], self.capacity))
            out[data_name] = arg
        return out

    def _pushes(self, rows: dict[str, np.ndarray], versions: list[int],
                samples: int) -> list[dict[str, Any]]:
        self.seq += 1
        pushes = [{"trainer": self.trainer_id, "seq": self.seq, "version": versions[s],
                   "samples": samples, "dense": {}, "sparse": {}}
                  for s in range(self.map.num_shards)]
        for p in self._ready:
            if p.name in self.frozen or p.config.is_static or p.grad is None:
                continue
            if p.name in self.map.sparse:
                local = to_numpy(p.touched_rows_array())
                global_rows = rows[p.name][local]
                for s, (pos, local_on_shard) in enumerate(self.map.split_rows(global_rows)):
                    if pos.size:
                        pushes[s]["sparse"][p.name] = (local_on_shard,
                                                       to_numpy(p.grad[local[pos]]))
            else:
                pushes[self.map.dense_owner[p.name]]["dense"][p.name] = to_numpy(p.grad)
        return pushes


def _nbytes(push: dict[str, Any]) -> int:
    total = sum(g.nbytes for g in push["dense"].values())
    return total + sum(r.nbytes + g.nbytes for r, g in push["sparse"].values())
