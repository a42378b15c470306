"""One parameter-server shard: its parameters, their optimizer state and the push log.

A plain class (the cluster makes it a Ray actor; tests without Ray call it directly). The
update formulas are sculler's optimizers' (``Optimizer.update`` with ``rows=`` for sparse
tables), so a shard applies exactly what local training would.

A push is a dict ``{"trainer", "seq", "version", "samples", "dense": {name: grad},
"sparse": {name: (local_rows, grad_rows)}}``. ``seq`` numbers a trainer's pushes; a push whose
``seq`` is not above the last one applied for that trainer is a duplicate (a retry after a
timeout) and is ignored, so every push applies at most once. ``last_seq`` is part of the
checkpoint, so this holds across a restart too.

Sync mode: :meth:`apply_sync` applies the SUM of one step's pushes as one optimizer step (the
batch-summed convention: equal to one local step on the concatenated batches). Async mode:
:meth:`apply_async` applies each push alone, unless it was computed on parameters more than
``max_staleness`` versions old, in which case it is dropped and counted.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np

from sculler.distributed.checkpoint import load_arrays, save_arrays
from sculler.distributed.sharding import ShardMap
from sculler.optimizer import Optimizer


def shard_checkpoint_path(checkpoint_dir: str, shard: int) -> str:
    return os.path.join(checkpoint_dir, f"pserver-{shard}.safetensors")


class ParameterShard:
    """Shard ``shard`` of ``shard_map``; restores itself from ``checkpoint_dir`` when a
    checkpoint of it is there (a restart after a crash), else waits for :meth:`init_values`.

    Args:
        shard: this shard's index.
        shard_map: the placement of all parameters.
        optimizer: the user's optimizer (copied; its state is this shard's own).
        max_staleness: async mode's bound on ``version - push["version"]``.
        checkpoint_dir: where checkpoints go (None: never written, nothing restored).
    """

    def __init__(self, shard: int, shard_map: ShardMap, optimizer: Optimizer,
                 max_staleness: int = 3, checkpoint_dir: str | None = None) -> None:
        self.shard = shard
        self.map = shard_map
        self.optimizer = copy.deepcopy(optimizer)
        self.max_staleness = int(max_staleness)
        self.checkpoint_dir = checkpoint_dir
        self.values: dict[str, np.ndarray] = {}
        self.version = 0
        self.last_step = -1
        self.last_seq: dict[int, int] = {}
        self.counters = {"applied": 0, "dropped": 0, "duplicates": 0}
        self.restored_version: int | None = None
        path = self._path()
        if path is not None and os.path.exists(path):
            self._restore(path)

    # ------------------------------------------------------------------ state
    def _path(self) -> str | None:
        if self.checkpoint_dir is None:
            return None
        return shard_checkpoint_path(self.checkpoint_dir, self.shard)

    def init_values(self, values: dict[str, np.ndarray]) -> int:
        """Take this shard's initial values (dense parameters whole, its rows of sparse
        tables) unless it restored a checkpoint; returns the version."""
        if self.restored_version is not None:
            return self.version
        expected = self.map.dense_on(self.shard) + self.map.sparse
        missing = [n for n in expected if n not in values]
        if missing:
            raise ValueError(f"parameter server {self.shard}: no initial value for {missing}")
        for name in expected:
            v = np.array(values[name], dtype=np.float32, copy=True)
            if name in self.map.sparse:
                want = (self.map.rows_on(name, self.shard), int(self.map.configs[name].dims[1]))
            else:
                want = tuple(np.shape(values[name]))
            if v.shape != want:
                raise ValueError(f"parameter server {self.shard}: {name!r} has shape "
                                 f"{v.shape}, expected {want}")
            self.values[name] = v
        self.checkpoint(-1)
        return self.version

    def checkpoint(self, step: int) -> dict[str, Any]:
        """Write values, optimizer state, version and ``last_seq`` atomically; returns
        :meth:`status` (nothing is written without a checkpoint_dir)."""
        path = self._path()
        if path is None:
            return self.status()
        arrays = {f"value/{k}": v for k, v in self.values.items()}
        arrays.update({f"opt/{k}": np.asarray(v) for k, v in self.optimizer.state_dict().items()})
        meta = {"shard": self.shard, "version": self.version, "last_step": self.last_step,
                "step": step, "last_seq": {str(k): v for k, v in self.last_seq.items()},
                "counters": self.counters}
        save_arrays(path, arrays, meta)
        return self.status()

    def _restore(self, path: str) -> None:
        arrays, meta = load_arrays(path)
        if meta["shard"] != self.shard:
            raise ValueError(f"{path!r} holds shard {meta['shard']}, not {self.shard}")
        self.values = {k[6:]: v for k, v in arrays.items() if k.startswith("value/")}
        self.optimizer.load_state_dict({k[4:]: v for k, v in arrays.items()
                                        if k.startswith("opt/")})
        self.version = int(meta["version"])
        self.last_step = int(meta["last_step"])
        self.last_seq = {int(k): int(v) for k, v in meta["last_seq"].items()}
        self.counters = dict(meta["counters"])
        self.restored_version = self.version

    def status(self) -> dict[str, Any]:
        """Version, counters, process id and the version restored at start (None: fresh)."""
        return {"shard": self.shard, "version": self.version, "pid": os.getpid(),
                "restored_version": self.restored_version, "last_seq": dict(self.last_seq),
                **self.counters}

    # ------------------------------------------------------------------ pulls
    def pull(self, dense: list[str], rows: dict[str, np.ndarray]) -> tuple[int, dict, dict]:
        """``(version, {name: value}, {name: value[local_rows]})`` for the named dense
        parameters and the given local rows of sparse tables."""
        return (self.version, {n: self.values[n] for n in dense},
                {n: self.values[n][r] for n, r in rows.items()})

    def pull_all(self) -> dict[str, np.ndarray]:
        """Every value this shard holds (to assemble the trained model)."""
        return self.values

    # ------------------------------------------------------------------ pushes
    def _fresh(self, push: dict[str, Any]) -> bool:
        trainer, seq = int(push["trainer"]), int(push["seq"])
        if seq <= self.last_seq.get(trainer, -1):
            self.counters["duplicates"] += 1
            return False
        self.last_seq[trainer] = seq
        return True

    def apply_sync(self, step: int, *pushes: dict[str, Any]) -> dict[str, Any]:
        """One optimizer step with the sum of ``pushes`` (one per trainer that computed a
        batch in sync step ``step``). A step already applied (a retried call) is ignored."""
        if step <= self.last_step:
            self.counters["duplicates"] += len(pushes)
            return self.status()
        fresh = [p for p in pushes if self._fresh(p)]
        self.last_step = step
        if fresh:
            self._update(fresh)
        return self.status()

    def apply_async(self, push: dict[str, Any]) -> dict[str, Any]:
        """Apply one push at once, or drop it when it is more than ``max_staleness`` versions
        old (counted as ``dropped``)."""
        if self._fresh(push):
            if self.version - int(push["version"]) > self.max_staleness:
                self.counters["dropped"] += 1
            else:
                self._update([push])
        return self.status()

    def _update(self, pushes: list[dict[str, Any]]) -> None:
        opt = self.optimizer
        configs = self.map.configs
        for name in pushes[0]["dense"]:
            grad = pushes[0]["dense"][name]
            grad = np.array(grad, copy=True)  # fetched arrays are read-only; clipping writes
            for p in pushes[1:]:
                grad += p["dense"][name]
            opt.update(name, self.values[name], grad, config=configs[name])
        names = {n for p in pushes for n in p["sparse"]}
        for name in sorted(names):
            parts = [p["sparse"][name] for p in pushes if name in p["sparse"]]
            rows = np.concatenate([r for r, _ in parts])
            grads = np.concatenate([g for _, g in parts])
            uniq, inverse = np.unique(rows, return_inverse=True)
            summed = np.zeros((uniq.shape[0], grads.shape[1]), dtype=grads.dtype)
            np.add.at(summed, inverse, grads)
            if uniq.size:
                opt.update(name, self.values[name], summed, config=configs[name], rows=uniq)
        opt.finish_batch(sum(int(p["samples"]) for p in pushes))
        self.version += 1
        self.counters["applied"] += len(pushes)
