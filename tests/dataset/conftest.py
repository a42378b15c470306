"""Fixtures: a private DATA_HOME and a 127.0.0.1 HTTP server; no test touches the internet."""

import functools
import hashlib
import http.server
import io
import tarfile
import threading

import pytest

from sculler.dataset import common


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    home = tmp_path / "data_home"
    monkeypatch.setattr(common, "DATA_HOME", str(home))
    return home


class _Server:
    def __init__(self, root):
        self.root = root
        self.hits = []
        hits = self.hits

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    s = _Server(root)
    yield s
    s.close()


@pytest.fixture
def publish(server, data_home, monkeypatch):
    """publish(module, url_attr, md5_attr, name, data): serve ``data`` and point the
    module's URL and MD5 constants at it."""

    def _publish(module, url_attr, md5_attr, name, data):
        (server.root / name).write_bytes(data)
        monkeypatch.setattr(module, url_attr, server.url(name))
        monkeypatch.setattr(module, md5_attr, hashlib.md5(data).hexdigest())
        return server.url(name)

    return _publish


def _make_tar(files, mode="w:gz"):
    """Bytes of a tar archive of ``files`` (member name -> str or bytes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in files.items():
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def make_tar():
    """make_tar(files, mode="w:gz"): bytes of a tar archive of ``files`` (name -> data)."""
    return _make_tar
