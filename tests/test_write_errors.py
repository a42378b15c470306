"""Ordinary I/O errors while writing (disk full, read-only directory) name the file being
written and what wrote it (sculler.fileio.FileWriteError, an OSError with the system's errno),
and leave the previous file whole with no temporary file behind."""

import errno
import os

import numpy as np
import pytest

from sculler.distributed import checkpoint as dist_checkpoint
from sculler.fileio import FileWriteError, atomic_write


@pytest.fixture
def disk_full(monkeypatch):
    """Every fsync reports ENOSPC (how a full disk shows up for data the kernel buffered)."""

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)


def test_a_checkpoint_in_a_read_only_directory_names_the_file(read_only_dir, small_sgd):
    path = read_only_dir / "model.ckpt"
    with pytest.raises(FileWriteError, match=r"^\[Errno 13\] save_checkpoint: cannot write "
                                             r"'.*/read-only/model\.ckpt': Permission denied$"):
        small_sgd().save_checkpoint(str(path))


def test_a_parameter_tar_on_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path,
                                                                            disk_full,
                                                                            small_sgd):
    trainer = small_sgd()
    path = tmp_path / "params.tar"
    path.write_bytes(b"the previous tar")
    with pytest.raises(FileWriteError, match=r"Parameters\.to_tar: cannot write "
                                             r"'.*params\.tar': No space left on device") as e:
        trainer.parameters.to_tar(str(path))
    assert e.value.errno == errno.ENOSPC and isinstance(e.value, OSError)
    assert path.read_bytes() == b"the previous tar"
    assert os.listdir(tmp_path) == ["params.tar"]  # no temporary file left


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_stream_on_a_full_disk_is_named_by_its_file_name(small_sgd):
    with open("/dev/full", "wb", buffering=0) as full:
        with pytest.raises(FileWriteError, match=r"Parameters\.to_tar: cannot write "
                                                 r"'/dev/full': No space left on device"):
            small_sgd().parameters.to_tar(full)


def test_a_distributed_checkpoint_on_a_full_disk_names_the_file(tmp_path, disk_full):
    with pytest.raises(FileWriteError, match=r"checkpoint: cannot write '.*master\.json'"):
        dist_checkpoint.save_json(str(tmp_path / "master.json"), {"a": 1})
    with pytest.raises(FileWriteError, match=r"checkpoint: cannot write '.*pserver-0"):
        dist_checkpoint.save_arrays(str(tmp_path / "pserver-0.safetensors"),
                                    {"w": np.zeros(3, np.float32)}, {})


def test_an_error_that_is_not_about_the_file_passes_unchanged(tmp_path):
    def write(stream):
        raise ConnectionResetError(errno.ECONNRESET, "peer went away")

    with pytest.raises(ConnectionResetError, match="peer went away"):
        atomic_write(str(tmp_path / "download.bin"), write, "download")
    assert os.listdir(tmp_path) == []


def test_cli_train_into_a_read_only_directory_is_one_line_naming_the_file(read_only_dir,
                                                                          tmp_path, capsys):
    from sculler import cli

    script = tmp_path / "tiny.py"
    script.write_text(
        "import numpy as np\nimport sculler as paddle\n"
        "x = paddle.layer.data(name='x', type=paddle.data_type.dense_vector(3))\n"
        "y = paddle.layer.data(name='y', type=paddle.data_type.integer_value(2))\n"
        "out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())\n"
        "cost = paddle.layer.classification_cost(input=out, label=y)\n"
        "optimizer = paddle.optimizer.Momentum(learning_rate=0.01)\n"
        "batch_size = 10\n"
        "def train_reader():\n"
        "    for i in range(20):\n"
        "        yield np.full(3, i / 20, np.float32), i % 2\n")
    code = cli.main(["train", "--config", str(script), "--num_passes", "1", "--no_progress",
                     "--save_dir", str(read_only_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("sculler: error: [Errno 13] Parameters.to_tar: cannot write '")
    assert "read-only/pass-00000.tar': Permission denied" in err
    assert "Traceback" not in err and err.count("\n") == 1
