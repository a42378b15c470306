import hashlib
import os

import pytest

from sculler.dataset import common


def test_md5file(tmp_path):
    p = tmp_path / "f.bin"
    data = os.urandom(3 << 20)
    p.write_bytes(data)
    assert common.md5file(p) == hashlib.md5(data).hexdigest()


def test_download_caches_by_md5(server, data_home):
    data = b"hello dataset\n" * 100
    (server.root / "a.txt").write_bytes(data)
    md5 = hashlib.md5(data).hexdigest()
    path = common.download(server.url("a.txt"), "demo", md5)
    assert path == os.path.join(str(data_home), "demo", "a.txt")
    assert open(path, "rb").read() == data
    assert common.download(server.url("a.txt"), "demo", md5) == path
    assert len(server.hits) == 1  # second call served from the cache
    assert os.listdir(os.path.dirname(path)) == ["a.txt"]  # no temp file left behind


def test_download_replaces_corrupt_cache_and_save_name(server, data_home):
    data = b"good bytes"
    (server.root / "a.txt").write_bytes(data)
    target = data_home / "demo" / "renamed.txt"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"truncated")
    path = common.download(server.url("a.txt"), "demo", hashlib.md5(data).hexdigest(),
                           save_name="renamed.txt")
    assert path == str(target)
    assert target.read_bytes() == data
    assert len(server.hits) == 1


def test_download_md5_mismatch_names_url_and_both_md5s(server, data_home):
    (server.root / "a.txt").write_bytes(b"other content")
    got = hashlib.md5(b"other content").hexdigest()
    url = server.url("a.txt")
    with pytest.raises(common.DownloadError) as info:
        common.download(url, "demo", "0" * 32)
    msg = str(info.value)
    assert url in msg and "0" * 32 in msg and got in msg
    assert len(server.hits) == common.RETRY_LIMIT
    assert os.listdir(data_home / "demo") == []


def test_download_http_error(server, data_home):
    url = server.url("missing.txt")
    with pytest.raises(common.DownloadError, match="missing.txt.*404"):
        common.download(url, "demo", "0" * 32)


def test_data_home_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("SCULLER_DATA_HOME", str(tmp_path / "elsewhere"))
    assert common._default_data_home() == str(tmp_path / "elsewhere")
    monkeypatch.delenv("SCULLER_DATA_HOME")
    assert common._default_data_home().endswith(os.path.join(".cache", "sculler", "dataset"))


def test_download_shows_a_byte_progress_bar(server, data_home, monkeypatch, capsys):
    data = os.urandom(3 << 20)
    (server.root / "big.bin").write_bytes(data)
    monkeypatch.setattr(common, "SHOW_PROGRESS", True)
    common.download(server.url("big.bin"), "demo", hashlib.md5(data).hexdigest())
    err = capsys.readouterr().err
    assert "big.bin" in err and "/3.00M" in err  # the total comes from Content-Length
