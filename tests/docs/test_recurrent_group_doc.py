"""The code blocks of docs/recurrent_group.md run in order as one script."""

import pathlib
import re

import sculler as paddle

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "recurrent_group.md"


def test_doc_blocks_run(capsys):
    paddle.layer.reset_names()
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S):
        exec(block, namespace)
    assert namespace["report"].max_error < 1e-6
    assert namespace["out"].shape == (5, 4)
    assert namespace["prob"].shape == (2, 2)
    assert "_h@rnn.w0" in capsys.readouterr().out
