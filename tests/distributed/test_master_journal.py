"""The master's task state survives a crash: every change is journaled (checksummed, fsynced)
before it is answered, and a master restarted within the same run replays it (no Ray here;
tests/distributed/test_cluster.py kills a real master)."""

import errno
import os

import pytest

from sculler.distributed.journal import Journal, read_journal
from sculler.distributed.master import Master
from sculler.fileio import FileFormatError, FileWriteError


def _state(master):
    return master.queue.state_dict()


def _pass_steps(pass_id, trainers=(0, 1)):
    """Two trainers working through a pass of 7 batches in tasks of 3, one dying midway."""
    steps = [("start_pass", (pass_id, 7, 3))]
    for i in range(4):
        for t in trainers:
            steps.append(("work", (t, i)))
    steps.append(("trainer_failed", (1,)))
    steps += [("work", (0, i)) for i in range(4, 9)]
    return steps


class Driver:
    """Hands out and commits like the cluster's driver (tokens ``trainer:seq``)."""

    def __init__(self, master):
        self.master, self.seq = master, 0

    def work(self, trainer, _):
        got = self.master.next_batch(trainer)
        if got is not None:
            self.seq += 1
            self.master.commit([(*got, f"{trainer}:{self.seq}")])


def _ops(tmp_path, run_id, checkpoint_at):
    """A live master through two passes (a snapshot between them and at ``checkpoint_at``);
    yields it after each step."""
    master = Master(60, str(tmp_path), run_id=run_id)
    driver = Driver(master)
    steps = (_pass_steps(0) + [("checkpoint", ({"pass": 0, "pass_done": True},))]
             + _pass_steps(1))
    for i, (name, args) in enumerate(steps):
        getattr(driver if name == "work" else master, name)(*args)
        if i in checkpoint_at:
            master.checkpoint({"pass": master.queue.pass_id, "pass_done": False})
        yield master


@pytest.mark.parametrize("checkpoint_at", [(), (5,), (3, 14, 20)])
def test_a_master_restarted_in_the_same_run_knows_every_commit(tmp_path, checkpoint_at):
    for step, live in enumerate(_ops(tmp_path, "run-a", checkpoint_at)):
        restarted = Master(60, str(tmp_path), run_id="run-a")  # what Ray's restart does
        assert _state(restarted) == _state(live), step
        assert restarted.queue.committed_batches() == live.queue.committed_batches()
    assert live.queue.pass_id == 1 and live.queue.pass_finished()
    assert live.queue.committed_batches() == 7


def test_a_new_run_starts_from_the_snapshot_the_shards_also_restart_from(tmp_path):
    live = Master(60, str(tmp_path), run_id="first")
    live.start_pass(0, 6, 2)
    for _ in range(3):
        task, index = live.next_batch(0)
        live.commit([(task, index, f"0:{index}")])
    live.checkpoint({"pass": 0, "pass_done": False})
    snapshot = _state(live)
    task, index = live.next_batch(0)
    live.commit([(task, index, "0:9")])
    resumed = Master(60, str(tmp_path), run_id="second")
    assert _state(resumed) == snapshot and resumed.queue.committed_batches() == 3
    assert resumed.snapshot() == {"pass": 0, "pass_done": False}
    again = Master(60, str(tmp_path), run_id="second")  # the new run's own journal replays
    assert _state(again) == snapshot
    assert sorted(os.listdir(tmp_path)) == ["master-journal-1.log", "master.json"]


def test_a_commit_resent_after_the_crash_that_lost_its_answer_counts_once(tmp_path):
    live = Master(60, str(tmp_path), run_id="r")
    live.start_pass(0, 4, 4)
    assert live.next_batch(0) == (0, 0) and live.next_batch(1) is None
    assert live.commit([(0, 0, "0:1")]) == [True]  # journaled; the answer is lost
    restarted = Master(60, str(tmp_path), run_id="r")
    assert restarted.commit([(0, 0, "0:1")]) == [True]  # the driver's resend
    assert restarted.commit([(0, 0, "1:7")]) == [False]  # another trainer's copy
    assert restarted.queue.committed_batches() == 1
    assert restarted.next_batch(1) == (0, 1)


def test_journal_drops_a_torn_tail_and_refuses_a_damaged_middle(tmp_path):
    path = str(tmp_path / "j.log")
    j = Journal(path, header={"run": "x"})
    j.append([{"op": "a"}, {"op": "b"}])
    j.close()
    whole = open(path, "rb").read()
    with open(path, "ab") as fh:
        fh.write(b'0123abcd {"op": "c"')  # a write cut short: no newline
    assert read_journal(path) == ([{"run": "x"}, {"op": "a"}, {"op": "b"}], len(whole))
    j = Journal(path)  # reopened: the torn tail is cut off before appending
    j.append([{"op": "d"}])
    j.close()
    assert [r.get("op") for r in read_journal(path)[0]] == [None, "a", "b", "d"]
    data = bytearray(open(path, "rb").read())
    data[data.index(b'"a"') + 1] = ord("z")  # a bit flipped in a middle record
    open(path, "wb").write(bytes(data))
    with pytest.raises(FileFormatError, match=r"j\.log.*line 2 is damaged"):
        read_journal(path)


def test_journal_on_a_full_disk_names_the_file_and_keeps_what_was_durable(tmp_path,
                                                                        monkeypatch):
    path = str(tmp_path / "j.log")
    j = Journal(path, header={"run": "x"})
    size = os.path.getsize(path)
    real_write = os.write

    def full(fd, data):
        real_write(fd, data[:5])  # part of it lands, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(FileWriteError,
                       match=r"master journal: cannot write '.*j\.log': No space left") as info:
        j.append([{"op": "commit"}])
    assert info.value.errno == errno.ENOSPC
    monkeypatch.setattr(os, "write", real_write)
    assert os.path.getsize(path) == size
    j.append([{"op": "later"}])
    assert [r.get("op") for r in read_journal(path)[0]] == [None, "later"]
