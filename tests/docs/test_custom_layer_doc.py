"""The code in docs/custom_layer.md runs and its layer passes the gradient check."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "custom_layer.md"


def test_tutorial_layer_and_check_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    namespace: dict = {}
    exec(blocks[0], namespace)  # the class, registered as "my_fc"
    exec(blocks[1], namespace)  # its gradient check
    report = namespace["report"]
    assert set(report.errors) == {"input 0 (layer_0)", "input 1 (layer_1)",
                                  "parameter _test_layer.w0", "parameter _test_layer.w1",
                                  "parameter _test_layer.wbias"}
    assert report.max_error < 1e-6
