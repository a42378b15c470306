"""Every ```python block of README.md and docs/*.md runs as written.

The blocks of one file run in order as one script (a subprocess, cwd and HOME a temporary
directory, so files a block writes, such as ``params.tar``, stay out of the checkout;
``MPLBACKEND=Agg``). A block right after the line ``<!-- skip-run: reason -->``
is a deliberate fragment and is left out; one marked ``<!-- skip-run: v1 config ... -->`` is a
v1 config file and is instead parsed with ``parse_config``, the path that really reads it.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"(?:^[ \t]*(<!--[^\n]*-->)[ \t]*\n)?^([ \t]*)```python[ \t]*\n(.*?)^\2```",
                   re.S | re.M)
SKIP = re.compile(r"<!--\s*skip-run:\s*(.*?)\s*-->")
DOC_FILES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
RUN_TIMEOUT_S = 300


def blocks_of(path: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """``(line number, code, skip reason or None)`` of each python block of ``path``."""
    text = path.read_text()
    found = []
    for m in BLOCK.finditer(text):  # fences may be indented (inside a list item)
        line = text.count("\n", 0, m.start(3))
        marker = SKIP.fullmatch(m.group(1) or "")
        found.append((line, textwrap.dedent(m.group(3)), marker.group(1) if marker else None))
    return found


def script_of(path: pathlib.Path) -> str:
    """The file's runnable blocks as one script; each starts by recording which block runs so
    a failure names it."""
    parts = ["import sys as _doc_sys\n"]
    for number, (line, code, reason) in enumerate(blocks_of(path), 1):
        if reason is not None:
            continue
        parts.append(f"_doc_sys.stderr.write('\\n[doc block {number} at line {line}]\\n')\n")
        parts.append(code)
    return "".join(parts)


def _env(home: pathlib.Path) -> dict:
    env = dict(os.environ, HOME=str(home), MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_doc_files_are_found():
    assert ROOT / "README.md" in DOC_FILES and len(DOC_FILES) > 5


def test_skip_marker_and_line_numbers_are_read(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("t\n```python\nx = 1\n```\n<!-- skip-run: fragment -->\n```python\ny\n```\n"
                   "- item:\n\n  ```python\n  z = 2\n  ```\n")
    assert blocks_of(doc) == [(2, "x = 1\n", None), (6, "y\n", "fragment"), (11, "z = 2\n", None)]
    assert "y\n" not in script_of(doc) and "x = 1\n" in script_of(doc)


@pytest.mark.parametrize("doc", [  # distributed.md starts a Ray cluster of its own
    pytest.param(d, marks=pytest.mark.slow) if d.name == "distributed.md" else d
    for d in DOC_FILES], ids=lambda p: p.name)
def test_python_blocks_run_in_order(doc, tmp_path):
    runnable = [b for b in blocks_of(doc) if b[2] is None]
    if not runnable:
        pytest.skip(f"{doc.name} has no runnable python block")
    script = tmp_path / f"{doc.stem}_blocks.py"
    script.write_text(script_of(doc))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        started = re.findall(r"\[doc block (\d+) at line (\d+)\]", proc.stderr)
        where = f"block {started[-1][0]} (line {started[-1][1]})" if started else "start-up"
        pytest.fail(f"{doc.relative_to(ROOT)}: {where} failed:\n{proc.stderr[-3000:]}")


V1_FRAGMENTS = [(doc, line, code) for doc in DOC_FILES for line, code, reason in blocks_of(doc)
                if reason is not None and reason.lower().startswith("v1 config")]


@pytest.mark.parametrize("doc,line,code", V1_FRAGMENTS,
                         ids=[f"{d.name}:{n}" for d, n, _ in V1_FRAGMENTS])
def test_v1_config_blocks_parse(doc, line, code, tmp_path):
    config = tmp_path / "conf.py"
    config.write_text(textwrap.dedent(code))
    checker = ("import sys\nfrom sculler.config.config_parser import parse_config\n"
               "parsed = parse_config(sys.argv[1], '')\n"
               "assert parsed.model_config.layers, 'no layers declared'\n")
    proc = subprocess.run([sys.executable, "-c", checker, str(config)], cwd=ROOT,
                          env=_env(tmp_path), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, (f"{doc.relative_to(ROOT)}: v1 config block at line {line} "
                                  f"does not parse:\n{proc.stderr[-3000:]}")
