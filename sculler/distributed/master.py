"""The master: the task queue of the current pass, snapshotted with the shards' checkpoints.

A plain class made a Ray actor (restarted by Ray after a crash: it then reloads its last
snapshot, so the reader position survives). ``checkpoint`` saves the queue together with the
driver's own counters (``extra``), which is what a resumed run starts from.
"""

from __future__ import annotations

import os
from typing import Any

from sculler.distributed.checkpoint import load_json, save_json
from sculler.distributed.tasks import TaskQueue


class Master:
    """Wraps a :class:`TaskQueue`; ``checkpoint_dir`` holds ``master.json``."""

    def __init__(self, timeout_s: float, checkpoint_dir: str | None = None) -> None:
        self.queue = TaskQueue(timeout_s=timeout_s)
        self.path = None if checkpoint_dir is None else os.path.join(checkpoint_dir,
                                                                     "master.json")
        self.extra: dict[str, Any] | None = None
        if self.path is not None and os.path.exists(self.path):
            snap = load_json(self.path)
            self.queue.load_state_dict(snap["queue"])
            self.extra = snap["extra"]

    def snapshot(self) -> dict[str, Any] | None:
        """The driver counters of the last checkpoint (None: a fresh run)."""
        return self.extra

    def start_pass(self, pass_id: int, num_batches: int, batches_per_task: int) -> None:
        self.queue.start_pass(pass_id, num_batches, batches_per_task)

    def next_batch(self, trainer: int) -> tuple[int, int] | None:
        return self.queue.next_batch(trainer)

    def commit(self, batches: list[tuple[int, int]]) -> list[bool]:
        """Commit ``(task_id, index)`` batches in order; False marks a rejected duplicate."""
        return [self.queue.commit(t, i) for t, i in batches]

    def trainer_failed(self, trainer: int) -> None:
        self.queue.trainer_failed(trainer)

    def progress(self) -> dict[str, Any]:
        q = self.queue
        return {"pass_id": q.pass_id, "finished": q.pass_finished(),
                "committed": q.committed_batches(), "num_batches": q.num_batches,
                "requeued": q.requeued, "failed": sorted(q.failed)}

    def checkpoint(self, extra: dict[str, Any]) -> None:
        """Save the queue and the driver's ``extra`` counters atomically."""
        self.extra = dict(extra)
        if self.path is not None:
            save_json(self.path, {"queue": self.queue.state_dict(), "extra": self.extra})
