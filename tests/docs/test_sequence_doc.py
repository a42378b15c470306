"""docs/sequence.md: its python blocks run in order as one script and print what the comments
say."""

import contextlib
import io
import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "sequence.md"


def test_sequence_doc_blocks_run_and_print_what_they_claim():
    import sculler as paddle

    paddle.layer.reset_names()
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 10
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec("\n".join(blocks), {"__name__": "sequence_doc"})
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1 2 3 4 5 6 7] [0 3 7] [0 2 3 4 7]"
    assert "[4. 8.] [0. 4.]" in lines
    assert "[[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]" in lines
    assert "[1. 7. 2.] [[2.0, 0.0], [1.0, 0.0]]" in lines
    assert lines[-2:] == ["1.0 1.0", "True"]
