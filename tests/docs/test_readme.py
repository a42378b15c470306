"""The README's tour runs, and its set-up commands are the ones .ci/run executes."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_tour_layer_passes_its_gradient_check(capsys):
    tour = re.findall(r"```python\n(.*?)```", README, flags=re.S)[0]
    exec(tour, {})
    printed = capsys.readouterr().out
    errors = [float(e) for e in re.findall(r": ([0-9.e+-]+)", printed)]
    assert len(errors) == 2 and max(errors) < 1e-6


def test_exactly_two_setup_commands_between_markers():
    for tag in ("main-command", "test-command"):
        block = re.search(rf"<!-- {tag} -->\n```\n(.*?)\n```\n<!-- /{tag} -->", README, re.S)
        assert block and "\n" not in block.group(1).strip()
    assert "readme_command test-command" in (ROOT / ".ci" / "run").read_text()
