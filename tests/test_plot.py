import struct
import sys

import pytest

from sculler.plot import Ploter

pytest.importorskip("matplotlib", reason="plotting needs the optional extra sculler[plot]")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_plot_writes_png_with_both_curves(tmp_path, monkeypatch):
    monkeypatch.delenv("DISABLE_PLOT", raising=False)
    p = Ploter("train cost", "test cost")
    for step in range(5):
        p.append("train cost", step, 1.0 / (step + 1))
    p.append("test cost", 4, 0.3)
    path = tmp_path / "curves.png"
    p.plot(path)
    raw = path.read_bytes()
    assert raw[:8] == PNG_SIGNATURE
    assert raw[12:16] == b"IHDR"
    width, height = struct.unpack(">II", raw[16:24])
    assert width > 100 and height > 100
    assert p.data["train cost"].step == [0, 1, 2, 3, 4]
    assert p.data["train cost"].value[-1] == pytest.approx(0.2)
    assert (p.data["test cost"].step, p.data["test cost"].value) == ([4], [0.3])


def test_reset_and_unknown_title():
    p = Ploter("a")
    p.append("a", 0, 1.0)
    p.reset()
    assert p.data["a"].step == [] and p.data["a"].value == []
    with pytest.raises(ValueError, match="'b'"):
        p.append("b", 0, 1.0)
    with pytest.raises(TypeError):
        Ploter(3)


def test_disable_plot_is_a_noop(tmp_path, monkeypatch):
    monkeypatch.setenv("DISABLE_PLOT", "True")
    p = Ploter("a")
    p.append("a", 0, 1.0)
    p.plot(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_script_without_path_warns(monkeypatch):
    monkeypatch.delenv("DISABLE_PLOT", raising=False)
    p = Ploter("a")
    with pytest.warns(UserWarning, match="path"):
        p.plot()


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.delenv("DISABLE_PLOT", raising=False)
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    p = Ploter("a")
    p.append("a", 0, 1.0)
    with pytest.raises(ImportError, match=r"pip install sculler\[plot\]"):
        p.plot(tmp_path / "x.png")


def test_notebook_displays_png_inline(monkeypatch):
    import types

    monkeypatch.delenv("DISABLE_PLOT", raising=False)
    shown = []
    display = types.SimpleNamespace(
        clear_output=lambda wait=False: shown.append("clear"),
        display=shown.append,
        Image=lambda data: ("image", data),
    )
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: types.SimpleNamespace(config={"IPKernelApp": {}})
    fake.display = display
    monkeypatch.setitem(sys.modules, "IPython", fake)
    p = Ploter("a")
    p.append("a", 0, 1.0)
    p.append("a", 1, 0.5)
    p.plot()
    assert shown[0] == "clear"
    kind, data = shown[1]
    assert kind == "image" and data[:8] == PNG_SIGNATURE


def test_figure_has_axis_labels_and_a_title():
    p = Ploter("train cost", xlabel="batch", ylabel="cost", title="digits MLP")
    p.append("train cost", 0, 1.0)
    ax = p.figure().axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("batch", "cost", "digits MLP")
    default = Ploter("a").figure().axes[0]
    assert (default.get_xlabel(), default.get_ylabel()) == ("step", "value")
