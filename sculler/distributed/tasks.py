"""The master's task queue: runs of batches handed to trainers, each batch trained once a pass.

A pass of ``num_batches`` batches is cut into tasks ``[start, stop)``. A trainer asks for its
next batch; it gets the next one of its current task, or a task from ``todo`` (which then is
``pending`` on it). A batch counts only when it is *committed* (its update applied), in order
within its task; a task whose batches are all committed is ``done``. When a trainer dies, or
its task sees no activity for ``timeout_s``, the task goes back to the front of ``todo`` and
restarts at its first uncommitted batch, so no batch is lost and none is committed twice.
A task given up ``failure_max`` times goes to ``failed`` (PaddlePaddle's master did the same).

Every change that must outlive the process (a pass started, a batch committed, a task
re-queued) is also passed to ``log`` as a JSON-able record; :meth:`TaskQueue.replay` applies
such records to the last snapshot, which is how the master recovers its exact state after a
crash (see :mod:`sculler.distributed.master`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Task:
    """Batches ``start .. stop-1`` of pass ``pass_id``; ``committed`` and ``handed`` are the
    next batch to commit and to hand out; ``owner`` is the trainer it is pending on;
    ``last_token`` names the result whose commit was the last one (a resent commit of that
    same result is answered True again, not taken for a duplicate)."""

    task_id: int
    pass_id: int
    start: int
    stop: int
    committed: int
    handed: int
    owner: int | None = None
    deadline: float = 0.0
    failures: int = 0
    last_token: str | None = None


class TaskQueue:
    """todo / pending / done / failed queues over one pass at a time.

    Args:
        timeout_s: a pending task with no activity for this long is re-queued.
        failure_max: times a task may be re-queued before it is marked failed.
        clock: time source (seconds); tests pass a fake one.
        log: called with a record of every durable change (None: not recorded).
    """

    def __init__(self, timeout_s: float = 60.0, failure_max: int = 3,
                 clock: Callable[[], float] = time.monotonic,
                 log: Callable[[dict[str, Any]], None] | None = None) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self.failure_max = int(failure_max)
        self.clock = clock
        self.pass_id = -1
        self.num_batches = 0
        self.tasks: dict[int, Task] = {}
        self.todo: deque[int] = deque()
        self.done: set[int] = set()
        self.failed: set[int] = set()
        self.requeued = 0
        self.log = log

    def _record(self, **record: Any) -> None:
        if self.log is not None:
            self.log(record)

    def start_pass(self, pass_id: int, num_batches: int, batches_per_task: int) -> None:
        """Cut ``num_batches`` into tasks of ``batches_per_task`` and put them all in todo."""
        if batches_per_task < 1:
            raise ValueError(f"batches_per_task must be >= 1, got {batches_per_task}")
        self.pass_id, self.num_batches = int(pass_id), int(num_batches)
        self.tasks = {}
        for tid, start in enumerate(range(0, num_batches, batches_per_task)):
            stop = min(start + batches_per_task, num_batches)
            self.tasks[tid] = Task(tid, self.pass_id, start, stop, start, start)
        self.todo = deque(self.tasks)
        self.done, self.failed = set(), set()
        self._record(op="start_pass", pass_id=self.pass_id, num_batches=self.num_batches,
                     batches_per_task=int(batches_per_task))

    def _owned(self, trainer: int) -> Task | None:
        """The task ``trainer`` is working through (one with batches left to hand out)."""
        for t in self.tasks.values():
            if t.owner == trainer and t.handed < t.stop:
                return t
        return None

    def expire(self) -> None:
        """Re-queue pending tasks whose deadline has passed."""
        now = self.clock()
        for t in self.tasks.values():
            if t.owner is not None and t.task_id not in self.done and t.deadline < now:
                self._requeue(t)

    def _requeue(self, task: Task) -> None:
        task.owner = None
        task.handed = task.committed
        task.failures += 1
        self.requeued += 1
        self._record(op="requeue", task=task.task_id)
        if task.failures > self.failure_max:
            self.failed.add(task.task_id)
        else:
            self.todo.appendleft(task.task_id)

    def next_batch(self, trainer: int) -> tuple[int, int] | None:
        """``(task_id, batch_index)`` for ``trainer`` to compute, or None (nothing to hand
        out now: the pass is finished or the rest is pending on other trainers)."""
        self.expire()
        task = self._owned(trainer)
        if task is None:
            while self.todo:
                cand = self.tasks[self.todo.popleft()]
                if cand.committed < cand.stop:
                    task = cand
                    break
            if task is None:
                return None
            task.owner = trainer
        task.deadline = self.clock() + self.timeout_s
        index = task.handed
        task.handed += 1
        return task.task_id, index

    def commit(self, task_id: int, index: int, token: str | None = None) -> bool:
        """Record that batch ``index`` of ``task_id`` was applied. False (and nothing
        changes) for a batch that is not the task's next one: a duplicate or a stale one.
        ``token`` names the result committed (trainer and push number): the same commit sent
        again (its answer was lost in a crash) is True again and changes nothing."""
        task = self.tasks.get(task_id)
        if (task is not None and token is not None and task.last_token == token
                and task.committed == index + 1):
            return True
        if task is None or task.committed != index or task_id in self.failed:
            return False
        task.committed += 1
        task.last_token = token
        self._record(op="commit", task=task_id, index=index, token=token)
        task.deadline = self.clock() + self.timeout_s
        if task.committed >= task.stop:
            self.done.add(task_id)
            task.owner = None
        return True

    def trainer_failed(self, trainer: int) -> None:
        """``trainer`` is gone: its task returns to todo at its first uncommitted batch."""
        for t in self.tasks.values():
            if t.owner == trainer and t.task_id not in self.done:
                self._requeue(t)

    def pass_finished(self) -> bool:
        return len(self.done) + len(self.failed) == len(self.tasks)

    def committed_batches(self) -> int:
        return sum(t.committed - t.start for t in self.tasks.values())

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (pending tasks are saved as todo, at their commit point)."""
        tasks = []
        for t in self.tasks.values():
            d = asdict(t)
            d.update(owner=None, handed=t.committed, deadline=0.0)
            tasks.append(d)
        return {"pass_id": self.pass_id, "num_batches": self.num_batches, "tasks": tasks,
                "done": sorted(self.done), "failed": sorted(self.failed),
                "requeued": self.requeued}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.pass_id, self.num_batches = int(d["pass_id"]), int(d["num_batches"])
        self.tasks = {int(t["task_id"]): Task(**t) for t in d["tasks"]}
        self.done, self.failed = set(d["done"]), set(d["failed"])
        self.requeued = int(d["requeued"])
        self.todo = deque(tid for tid in self.tasks
                          if tid not in self.done and tid not in self.failed)

    def replay(self, records: list[dict[str, Any]]) -> None:
        """Apply ``records`` (what ``log`` was given since this state was saved), in order,
        without logging them again; then every pending task is back in todo at its commit
        point, as after :meth:`load_state_dict`.

        Raises:
            ValueError: a record that does not fit this state (a journal of another run).
        """
        log, self.log = self.log, None
        try:
            for rec in records:
                if not self._apply(rec):
                    raise ValueError(f"task queue: record {rec} does not apply to pass "
                                     f"{self.pass_id} as saved")
        finally:
            self.log = log
        self.load_state_dict(self.state_dict())

    def _apply(self, rec: dict[str, Any]) -> bool:
        """Apply one logged record; False when it does not fit this state."""
        op = rec.get("op")
        if op == "start_pass":
            self.start_pass(rec["pass_id"], rec["num_batches"], rec["batches_per_task"])
            return True
        if op == "commit":
            return self.commit(rec["task"], rec["index"], rec["token"])
        if op == "requeue" and rec.get("task") in self.tasks:
            self._requeue(self.tasks[rec["task"]])
            return True
        return False
