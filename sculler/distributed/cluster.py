"""``Cluster``: parameter servers, trainers and a master as Ray actors, driven from here.

The calling process (the driver) runs the loop and raises the events. Per step it asks every
live trainer for one batch's gradients; a trainer takes its batch from the master's task
queue, pulls what it needs from the shards and returns one push per shard (as Ray object
references: gradients travel trainer -> object store -> shard, not through the driver). The
driver commits the batches with the master (a duplicate is rejected) and hands the pushes of
the committed batches to the shards:

- sync: every shard applies the sum of the step's pushes as one optimizer step, then the next
  step starts (a barrier per step);
- async: a trainer's pushes are applied as soon as it returns, while the others compute.

Every remote call has a deadline (``rpc_timeout_s``). A dead trainer's task is re-queued at
its first uncommitted batch; a killed parameter server is restarted by Ray and reloads its
last checkpoint (the updates since are lost and counted); a killed master is restarted by Ray
and replays its journal (every commit is durable before it is answered), so it loses no
batch. Checkpoints (every ``checkpoint_every`` steps and at the end of each pass) hold every
shard and the master's queue, so a run started again with the same ``checkpoint_dir`` resumes
where it stopped.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import pickle
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from sculler import backend
from sculler import event as E
from sculler.core.evaluator import metrics_of
from sculler.distributed.master import Master
from sculler.distributed.pserver import ParameterShard
from sculler.distributed.rpc import RemoteTimeout, call, call_all, import_ray
from sculler.distributed.sharding import ShardMap
from sculler.distributed.worker import TrainerWorker
from sculler.optimizer import Optimizer
from sculler.parameters import Parameters, training_topology
from sculler.topology import Topology


def merge_evaluator(into: Any, batch: Any) -> None:
    """Add a one-batch evaluator's counts to a pass evaluator of the same type (numbers and
    arrays are summed; a None count takes the other's)."""
    for key, value in vars(batch).items():
        if key in ("config", "name"):
            continue
        mine = getattr(into, key, None)
        if mine is None:
            setattr(into, key, value.copy() if isinstance(value, np.ndarray) else value)
        elif isinstance(value, bool):
            setattr(into, key, mine or value)
        elif isinstance(value, (int, float, np.ndarray, np.number)):
            setattr(into, key, mine + value)



def _fingerprints(batches: Iterable[Any], limit: int) -> tuple[int, list[bytes | None]]:
    """How many batches there are, and a digest of each of the first ``limit`` (None for a
    batch that cannot be pickled, which is then not compared)."""
    count, prints = 0, []
    for batch in batches:
        if count < limit:
            try:
                prints.append(hashlib.blake2b(pickle.dumps(batch, protocol=5)).digest())
            except Exception:  # noqa: BLE001 - an unpicklable batch is just not compared
                prints.append(None)
        count += 1
    return count, prints


def check_repeatable(reader: Callable[[], Iterable[Any]], compared: int = 3) -> int:
    """The number of batches ``reader`` yields, after checking that two calls yield the same
    first ``compared`` batches: trainers read the reader themselves and the master hands out
    batches by index, so a reader that shuffles differently on every call (an unseeded
    ``reader.shuffle``) would train some batches twice and others never."""
    count, first = _fingerprints(reader(), compared)
    if count == 0:
        raise ValueError("the reader yielded no batches")
    _, second = _fingerprints(itertools.islice(reader(), compared), compared)
    for i, (a, b) in enumerate(zip(first, second)):
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"the reader yields different batches on two calls (batch {i} differs): "
                "distributed training hands out batches by index and every trainer reads the "
                "reader itself, so it must yield the same batches in the same order on every "
                "call; shuffle with a seed fixed inside the reader (e.g. random.Random(0) per "
                "call) or shuffle the data on disk between runs")
    return count

def trainer_actor_options(use_gpu: bool) -> dict[str, Any]:
    """Ray options of a trainer actor: no whole CPU (all roles fit on a small machine), not
    restarted (its task goes to another trainer), and one GPU of its own with ``use_gpu``."""
    options: dict[str, Any] = {"max_restarts": 0, "num_cpus": 0}
    if use_gpu:
        options["num_gpus"] = 1
    return options


def check_gpus(resources: dict[str, float], num_trainers: int) -> None:
    """Ray would wait forever for GPUs the cluster does not have: say so instead."""
    have = float(resources.get("GPU", 0))
    if have < num_trainers:
        raise ValueError(f"Cluster(use_gpu=True): {num_trainers} trainers need one GPU each but "
                         f"the Ray cluster has {have:g} GPUs; use fewer trainers, add GPU "
                         "nodes, or use_gpu=False")


class Cluster:
    """Parameter-server training on a Ray cluster.

    Args:
        num_trainers: trainer actors (each computes one batch per step).
        num_pservers: parameter-server shards.
        mode: ``"sync"`` (sum of the trainers' gradients per step, equal to local training
            on the concatenated batches) or ``"async"`` (apply on arrival, bounded staleness).
        address: a Ray cluster to join (default: ``RAY_ADDRESS``, else a local one is started).
        checkpoint_dir: shard and master checkpoints; a run with an existing one resumes.
            None: a temporary directory removed by :meth:`shutdown` (servers still recover).
        checkpoint_every: steps between checkpoints.
        rpc_timeout_s: deadline of every remote call (and the master's task timeout).
        batches_per_task: batches in one task (default: about 4 tasks per trainer a pass).
        max_staleness: async: drop pushes computed on parameters older than this many
            versions (default ``max(1, 1.5 * num_trainers)``, PaddlePaddle's ratio).
        use_gpu: each trainer actor asks Ray for one GPU and computes there (default: what
            ``init(use_gpu=...)`` chose); parameter servers stay on the CPU.
    """

    def __init__(self, num_trainers: int = 2, num_pservers: int = 2, mode: str = "sync",
                 address: str | None = None, checkpoint_dir: str | None = None,
                 checkpoint_every: int = 100, rpc_timeout_s: float = 60.0,
                 batches_per_task: int | None = None, max_staleness: int | None = None,
                 use_gpu: bool | None = None):
        for name, value in (("num_trainers", num_trainers), ("num_pservers", num_pservers),
                            ("checkpoint_every", checkpoint_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Cluster: {name} must be an int >= 1, got {value!r}")
        if mode not in ("sync", "async"):
            raise ValueError(f"Cluster: mode must be 'sync' or 'async', got {mode!r}")
        if not rpc_timeout_s > 0:
            raise ValueError(f"Cluster: rpc_timeout_s must be > 0, got {rpc_timeout_s!r}")
        self.num_trainers, self.num_pservers, self.mode = num_trainers, num_pservers, mode
        self.checkpoint_every = checkpoint_every
        self.timeout = float(rpc_timeout_s)
        self.batches_per_task = batches_per_task
        self.max_staleness = (max(1, int(1.5 * num_trainers)) if max_staleness is None
                              else int(max_staleness))
        self.use_gpu = backend.gpu_enabled() if use_gpu is None else bool(use_gpu)
        self._ray = ray = import_ray()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address or os.environ.get("RAY_ADDRESS"),
                     include_dashboard=False, logging_level="WARNING")
        self._tmp = None
        if checkpoint_dir is None:
            self._tmp = checkpoint_dir = tempfile.mkdtemp(prefix="sculler-dist-")
        self.checkpoint_dir = os.path.abspath(checkpoint_dir)
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        self.shards: list[Any] = []
        self.trainers: list[Any] = []
        self.master: Any = None
        self.stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """End the actors, remove a temporary checkpoint dir, and disconnect from Ray if this
        cluster started it."""
        self._end_actors()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns_ray = False

    def _end_actors(self) -> None:
        for handle in self.trainers + self.shards + [self.master]:
            if handle is not None:
                self._ray.kill(handle, no_restart=True)
        self.trainers, self.shards, self.master = [], [], None

    def _kill(self, role: str, handle: Any) -> int:
        """SIGKILL the actor's process (``ray.kill`` when it runs on another node)."""
        info = call(role, handle.node_status, timeout_s=self.timeout)
        if info["node"] == self._ray.get_runtime_context().get_node_id():
            os.kill(info["pid"], signal.SIGKILL)
        else:
            self._ray.kill(handle, no_restart=False)
        return info["pid"]

    def kill_pserver(self, i: int) -> int:
        """SIGKILL parameter server ``i``'s process (a crash drill); returns its pid. Ray
        restarts it and it reloads its last checkpoint."""
        return self._kill(f"pserver {i}", self.shards[i])

    def kill_master(self) -> int:
        """SIGKILL the master's process; returns its pid. Ray restarts it and it replays its
        journal, so it knows every batch committed until then."""
        return self._kill("master", self.master)

    def kill_trainer(self, i: int) -> int:
        """SIGKILL trainer ``i``'s process; its task goes to another trainer."""
        return self._kill(f"trainer {i}", self.trainers[i])

    # ------------------------------------------------------------------ set-up
    def _start(self, topology: Topology, parameters: Parameters, optimizer: Optimizer,
               reader: Callable, feeding: Any, frozen: set[str]) -> ShardMap:
        ray = self._ray
        mc = topology.proto()
        smap = ShardMap(mc.parameters, self.num_pservers)
        # actors hold no whole CPU (all roles fit on a small machine); Ray runs each with
        # OMP_NUM_THREADS=1, so BLAS uses one thread per process
        shard_cls = ray.remote(_actor(ParameterShard))
        self.shards = [shard_cls.options(max_restarts=-1, max_task_retries=0, num_cpus=0).remote(
            s, smap, optimizer, self.max_staleness, self.checkpoint_dir)
            for s in range(self.num_pservers)]
        self.master = ray.remote(_actor(Master)).options(max_restarts=-1, num_cpus=0).remote(
            self.timeout, self.checkpoint_dir, uuid.uuid4().hex)
        trainer_cls = ray.remote(_actor(TrainerWorker))
        if self.use_gpu:
            check_gpus(ray.cluster_resources(), self.num_trainers)
        self.trainers = [trainer_cls.options(**trainer_actor_options(self.use_gpu)).remote(
            t, mc, topology.data_type(), feeding, reader, smap, self.shards, self.master,
            frozen, self.timeout, use_gpu=self.use_gpu) for t in range(self.num_trainers)]
        for s, shard in enumerate(self.shards):  # the processes start meanwhile
            values = {n: parameters.get(n) for n in smap.dense_on(s)}
            for name in smap.sparse:
                values[name] = smap.slice_table(name, parameters.parameter_set[name].value, s)
            call(f"pserver {s}", shard.init_values, ray.put(values), timeout_s=self.timeout)
            del values
        statuses = call_all([(f"pserver {s}", h.status, ()) for s, h in enumerate(self.shards)],
                            self.timeout)
        call_all([(f"trainer {t}", h.start_seq,
                   (max(st["last_seq"].get(t, 0) for st in statuses),))
                  for t, h in enumerate(self.trainers)], self.timeout)
        return smap

    # ------------------------------------------------------------------ training
    def train(self, cost: Any, parameters: Parameters, update_equation: Optimizer,
              reader: Callable[[], Iterable[Any]], num_passes: int = 1,
              event_handler: Callable[[Any], None] | None = None, feeding: Any = None,
              immutable_parameters: Iterable[str] | None = None) -> None:
        """``trainer.SGD(...).train`` on the cluster; ``parameters`` holds the trained values
        when it returns. Events: BeginTraining, BeginPass, EndIteration (one per committed
        batch; also ``trainer_id``, sync ``step``, ``pushed_bytes``, ``pulled_bytes``),
        EndPass (metrics over all trainers plus ``dist.*`` counters), EndTraining.

        The reader must yield the same batches in the same order on every call: each
        trainer reads it itself and the master hands out batches by index."""
        topology = training_topology(cost, parameters, update_equation)
        frozen = set(immutable_parameters or ())
        handler = E.as_handler(event_handler)
        num_batches = check_repeatable(reader)
        per_task = self.batches_per_task or max(1, math.ceil(num_batches /
                                                             (4 * self.num_trainers)))
        self._end_actors()
        try:
            smap = self._start(topology, parameters, update_equation, reader, feeding, frozen)
            snap = call("master", self.master.snapshot, timeout_s=self.timeout) or {}
            n = self.num_pservers
            self.stats = {"step": int(snap.get("step", 0)), "dropped": 0, "duplicates": 0,
                          "lost_updates": 0, "restarts": 0, "pushed_bytes": 0,
                          "pulled_bytes": 0, "batches": 0, "versions": [0] * n,
                          "pids": [None] * n, "shard_dropped": [0] * n}
            first_pass = int(snap.get("pass", 0))
            resume = bool(snap) and not snap.get("pass_done", False)
            if snap.get("pass_done"):
                first_pass += 1
            self._live = set(range(self.num_trainers))
            handler(E.BeginTraining())
            for pass_id in range(first_pass, num_passes):
                self._pass(pass_id, num_batches, per_task, handler, resume)
                resume = False
            self._gather(smap, parameters)
            handler(E.EndTraining())
        finally:
            self._end_actors()

    def _pass(self, pass_id: int, num_batches: int, per_task: int, handler: Callable,
              resume: bool) -> None:
        handler(E.BeginPass(pass_id))
        if not resume:
            call("master", self.master.start_pass, pass_id, num_batches, per_task,
                 timeout_s=self.timeout)
        self._pass_evals: list[Any] | None = None
        run = self._sync_steps if self.mode == "sync" else self._async_steps
        run(pass_id, handler)
        self._checkpoint(pass_id, pass_done=True)
        prog = call("master", self.master.progress, timeout_s=self.timeout)
        if prog["failed"]:
            raise RuntimeError(f"pass {pass_id}: tasks {prog['failed']} failed on every "
                               "trainer they were given to")
        metrics = metrics_of(self._pass_evals or [])
        st = self.stats
        metrics.update({"dist.dropped": st["dropped"], "dist.duplicates": st["duplicates"],
                        "dist.lost_updates": st["lost_updates"],
                        "dist.pserver_restarts": st["restarts"],
                        "dist.requeued": prog["requeued"],
                        "dist.live_trainers": len(self._live)})
        handler(E.EndPass(pass_id, metrics))

    def _submit(self, t: int, pass_id: int) -> list[Any]:
        return self.trainers[t].compute.options(num_returns=1 + self.num_pservers).remote(
            pass_id)

    def _trainer_lost(self, t: int) -> None:
        self._live.discard(t)
        self._ray.kill(self.trainers[t], no_restart=True)
        call("master", self.master.trainer_failed, t, timeout_s=self.timeout)
        if not self._live:
            raise RuntimeError("every trainer has died; the run cannot go on (resume it "
                               "from checkpoint_dir)")

    def _result(self, t: int, refs: list[Any], deadline: float) -> dict | None:
        """Trainer ``t``'s meta, or None when it died or missed the deadline."""
        ray = self._ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            return ray.get(refs[0], timeout=max(deadline - time.monotonic(), 0.01))
        except (RayActorError, GetTimeoutError):
            self._trainer_lost(t)
            return None

    def _sync_steps(self, pass_id: int, handler: Callable) -> None:
        while True:
            deadline = time.monotonic() + self.timeout
            refs = {t: self._submit(t, pass_id) for t in sorted(self._live)}
            results = [(t, self._result(t, r, deadline), r) for t, r in refs.items()]
            got = [(t, m, r) for t, m, r in results if m is not None and m["batch"] is not None]
            if not got:
                prog = call("master", self.master.progress, timeout_s=self.timeout)
                if prog["finished"]:
                    return
                time.sleep(0.05)  # the rest is pending on a trainer that is being replaced
                continue
            kept = self._commit(got)
            if kept:
                step = self.stats["step"]
                self._apply([(f"pserver {s}", self.shards[s].apply_sync,
                              (step, *[r[1 + s] for _, _, r in kept]))
                             for s in range(self.num_pservers)])
                self._after_step(pass_id, kept, handler)

    def _async_steps(self, pass_id: int, handler: Callable) -> None:
        ray = self._ray
        inflight = {t: self._submit(t, pass_id) for t in sorted(self._live)}
        idle: set[int] = set()
        while True:
            if not inflight:
                prog = call("master", self.master.progress, timeout_s=self.timeout)
                if prog["finished"]:
                    return
                time.sleep(0.05)
                inflight = {t: self._submit(t, pass_id) for t in sorted(self._live)}
                idle.clear()
                continue
            by_ref = {r[0]: t for t, r in inflight.items()}
            ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=self.timeout)
            if not ready:
                raise RemoteTimeout("trainer", "compute", self.timeout)
            t = by_ref[ready[0]]
            refs = inflight.pop(t)
            meta = self._result(t, refs, time.monotonic() + self.timeout)
            if meta is None:
                continue
            if meta["batch"] is None:
                idle.add(t)
                continue
            if self._commit([(t, meta, refs)]):
                self._apply([(f"pserver {s}", self.shards[s].apply_async, (refs[1 + s],))
                             for s in range(self.num_pservers)])
                self._after_step(pass_id, [(t, meta, refs)], handler)
            inflight[t] = self._submit(t, pass_id)

    def _commit(self, got: list[tuple[int, dict, list]]) -> list[tuple[int, dict, list]]:
        # the token (trainer, push number) makes a commit resent after a master crash
        # answer True again instead of being taken for a duplicate
        batches = [(m["task"], m["batch"], f"{m['trainer']}:{m['seq']}") for _, m, _ in got]
        accepted = call("master", self.master.commit, batches, timeout_s=self.timeout)
        self.stats["duplicates"] += accepted.count(False)
        return [g for g, ok in zip(got, accepted) if ok]

    def _apply(self, calls: list[tuple[str, Any, tuple]]) -> None:
        for s, status in enumerate(call_all(calls, self.timeout)):
            self._observe(s, status)

    def _observe(self, s: int, status: dict[str, Any]) -> None:
        """Track shard ``s``: a new process means it restarted from a checkpoint, losing
        the versions applied since (counted in ``lost_updates``)."""
        st = self.stats
        if st["pids"][s] is not None and status["pid"] != st["pids"][s]:
            st["lost_updates"] += max(0, st["versions"][s] - status["restored_version"])
            st["restarts"] += 1
        st["pids"][s], st["versions"][s] = status["pid"], status["version"]
        st["shard_dropped"][s] = status["dropped"]
        st["dropped"] = sum(st["shard_dropped"])

    def _after_step(self, pass_id: int, kept: list[tuple[int, dict, list]],
                    handler: Callable) -> None:
        st = self.stats
        for t, meta, _ in kept:
            evals = meta["evaluators"]
            if self._pass_evals is None:
                self._pass_evals = evals
            else:
                for into, batch in zip(self._pass_evals, evals):
                    merge_evaluator(into, batch)
            st["pushed_bytes"] += meta["pushed_bytes"]
            st["pulled_bytes"] += meta["pulled_bytes"]
            st["batches"] += 1
            ev = E.EndIteration(pass_id, meta["batch"], meta["cost_sum"] / meta["samples"],
                                metrics_of(evals))
            ev.trainer_id, ev.step = t, st["step"]
            ev.pushed_bytes, ev.pulled_bytes = meta["pushed_bytes"], meta["pulled_bytes"]
            handler(ev)
        st["step"] += 1
        if st["step"] % self.checkpoint_every == 0:
            self._checkpoint(pass_id, pass_done=False)

    def _checkpoint(self, pass_id: int, pass_done: bool) -> None:
        step = self.stats["step"]
        for s, status in enumerate(call_all([(f"pserver {s}", h.checkpoint, (step,))
                                             for s, h in enumerate(self.shards)],
                                            self.timeout)):
            self._observe(s, status)
        call("master", self.master.checkpoint,
             {"step": step, "pass": pass_id, "pass_done": pass_done}, timeout_s=self.timeout)

    def _gather(self, smap: ShardMap, parameters: Parameters) -> None:
        """Copy every shard's values back into ``parameters``."""
        parts = call_all([(f"pserver {s}", h.pull_all, ()) for s, h in enumerate(self.shards)],
                         self.timeout)
        for s, values in enumerate(parts):
            for name in smap.dense_on(s):
                parameters.set(name, values[name])
        for name in smap.sparse:
            smap.assemble_table(name, [p[name] for p in parts],
                                parameters.parameter_set[name].value)


def _actor(cls: type) -> type:
    """``cls`` plus ``node_status()`` (pid and Ray node id), as the class a Ray actor runs."""

    class Actor(cls):  # type: ignore[misc, valid-type]
        def node_status(self) -> dict[str, Any]:
            import ray

            return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                    "rss_bytes": _rss_bytes()}

    Actor.__name__ = Actor.__qualname__ = cls.__name__
    return Actor


def _rss_bytes() -> int:
    """This process's resident set size, from /proc (0 where there is none)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
