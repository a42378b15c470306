"""The master: the task queue of the current pass, durable at every change.

A plain class made a Ray actor (restarted by Ray after a crash, with the same arguments). Two
files in ``checkpoint_dir`` hold its state:

- ``master.json``: a snapshot of the queue, written with the shards' checkpoints together with
  the driver's own counters (``extra``); a run started again resumes from it;
- ``master-journal-<generation>.log``: every change since that snapshot (a pass started, a
  batch committed, a task re-queued), appended and fsynced before the call that made it
  returns (:mod:`sculler.distributed.journal`). Its first record names the run (``run_id``).

A master restarted within the same run (same ``run_id``: the shards kept their state) replays
the journal onto the snapshot, so it knows every batch committed up to the crash: no batch of
the pass is lost or trained twice, whatever ``checkpoint_every`` is. A new run (another
``run_id``: the shards restart from their checkpoints too) starts from the snapshot alone, the
consistent cut the shards also restart from.
"""

from __future__ import annotations

import glob
import os
import uuid
from typing import Any

from sculler.distributed.checkpoint import load_json, save_json
from sculler.distributed.journal import Journal, read_journal
from sculler.distributed.tasks import TaskQueue


class Master:
    """Wraps a :class:`TaskQueue`; ``checkpoint_dir`` holds its snapshot and journal.

    Args:
        timeout_s: the task timeout.
        checkpoint_dir: where the state is kept (None: in memory only).
        run_id: names this run; a master constructed again with the same one (Ray's restart)
            replays the journal. Default: a new id.
    """

    def __init__(self, timeout_s: float, checkpoint_dir: str | None = None,
                 run_id: str | None = None) -> None:
        self._records: list[dict[str, Any]] = []
        self.queue = TaskQueue(timeout_s=timeout_s, log=self._records.append)
        self.run_id = run_id or uuid.uuid4().hex
        self.extra: dict[str, Any] | None = None
        self.generation = 0
        self.journal: Journal | None = None
        self.dir = checkpoint_dir
        if checkpoint_dir is None:
            return
        self.path = os.path.join(checkpoint_dir, "master.json")
        if os.path.exists(self.path):
            snap = load_json(self.path)
            self.queue.load_state_dict(snap["queue"])
            self.extra = snap["extra"]
            self.generation = int(snap.get("generation", 0))
        path = self._journal_path(self.generation)
        records = read_journal(path)[0] if os.path.exists(path) else []
        if records and records[0].get("run") == self.run_id:
            self.queue.replay(records[1:])
            self.journal = Journal(path)
        else:
            self.journal = Journal(path, header={"run": self.run_id})
        self._remove_old_journals()

    def _journal_path(self, generation: int) -> str:
        return os.path.join(self.dir, f"master-journal-{generation}.log")

    def _remove_old_journals(self) -> None:
        keep = self._journal_path(self.generation)
        for path in glob.glob(os.path.join(self.dir, "master-journal-*.log")):
            if path != keep:
                os.unlink(path)

    def _flush(self) -> None:
        """Make the changes of the current call durable before it answers."""
        if self.journal is not None:
            self.journal.append(self._records)
        self._records.clear()

    def snapshot(self) -> dict[str, Any] | None:
        """The driver counters of the last checkpoint (None: a fresh run)."""
        return self.extra

    def start_pass(self, pass_id: int, num_batches: int, batches_per_task: int) -> None:
        self.queue.start_pass(pass_id, num_batches, batches_per_task)
        self._flush()

    def next_batch(self, trainer: int) -> tuple[int, int] | None:
        got = self.queue.next_batch(trainer)
        self._flush()  # expired tasks were re-queued
        return got

    def commit(self, batches: list[tuple]) -> list[bool]:
        """Commit ``(task_id, index)`` or ``(task_id, index, token)`` batches in order;
        False marks a rejected duplicate. They are durable when this returns; the same
        commit sent again with its token is answered True again."""
        accepted = [self.queue.commit(*b) for b in batches]
        self._flush()
        return accepted

    def trainer_failed(self, trainer: int) -> None:
        self.queue.trainer_failed(trainer)
        self._flush()

    def progress(self) -> dict[str, Any]:
        q = self.queue
        return {"pass_id": q.pass_id, "finished": q.pass_finished(),
                "committed": q.committed_batches(), "num_batches": q.num_batches,
                "requeued": q.requeued, "failed": sorted(q.failed)}

    def checkpoint(self, extra: dict[str, Any]) -> None:
        """Save the queue and the driver's ``extra`` counters atomically, then start the
        next generation's journal (the changes so far are in the snapshot)."""
        self.extra = dict(extra)
        if self.journal is None:
            return
        generation = self.generation + 1
        save_json(self.path, {"queue": self.queue.state_dict(), "extra": self.extra,
                              "generation": generation})
        self.journal.close()
        self.generation = generation
        self.journal = Journal(self._journal_path(generation), header={"run": self.run_id})
        self._remove_old_journals()
