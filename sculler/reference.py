"""The layer reference page, generated from the declarations in the layer files.

``python -m sculler.reference > docs/layer_reference.md`` writes it; a test fails when the
committed page differs from what the declarations give, so the page cannot go stale. Each entry
comes from one ``@layer_function`` (:mod:`sculler.core.faces`): the v2 and v1 names, the
signature, PaddlePaddle's default-name prefix, the engine types it emits with their input
counts, and the docstrings (the function's, then each engine class's first paragraph: the math).
"""

from __future__ import annotations

import inspect
import sys

import sculler.layers  # noqa: F401 - registers every layer file's types and functions
from sculler.core.faces import Face, faces
from sculler.core.layer import get_layer_class


def _first_paragraph(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(text.split())


def _inputs(cls: type) -> str:
    low, high = getattr(cls, "min_inputs", 1), getattr(cls, "max_inputs", None)
    if high is None:
        return f"{low} or more inputs"
    return f"{low} input{'s' * (low != 1)}" if low == high else f"{low} to {high} inputs"


def _entry(face: Face) -> list[str]:
    title = ", ".join(f"`{n}`" for n in face.v2_names) or "(v1 only)"
    lines = [f"### {title}", ""]
    sig = inspect.signature(face.function)
    sig = str(sig.replace(parameters=[p.replace(annotation=p.empty) for p in
                                      sig.parameters.values()],
                          return_annotation=sig.empty)).replace("'", '"')
    lines.append(f"`{face.v2_names[0] if face.v2_names else face.v1_names[0]}{sig}`")
    lines.append("")
    facts = [f"v1: {', '.join(f'`{n}`' for n in face.v1_names) or 'none'}"]
    if face.prefix:
        facts.append(f"default name `__{face.prefix}_<n>__`")
    facts.append(f"declared in `{face.module}`")
    lines += ["- " + "; ".join(facts)]
    for type_name in face.types:
        cls = get_layer_class(type_name)
        lines.append(f"- engine type `{type_name}` ({cls.__name__}, {_inputs(cls)}): "
                     f"{_first_paragraph(cls.__doc__)}")
    doc = _first_paragraph(face.function.__doc__)
    if doc:
        lines += ["", doc]
    return lines + [""]


def reference_markdown() -> str:
    """The whole page, grouped by the module that declares each function."""
    out = ["# Layer reference", "",
           "Generated from the layer files' `@layer_function` declarations by "
           "`python -m sculler.reference > docs/layer_reference.md`; do not edit by hand. "
           "Every function is `paddle.layer.<v2 name>` in the v2 API and "
           "`<v1 name>` in a v1 config (`from sculler.config.helpers import *`). "
           "How to add a layer: [custom_layer.md](custom_layer.md).", ""]
    module = None
    built_in = [f for f in faces() if f.module.startswith("sculler.")]
    for face in sorted(built_in, key=lambda f: (f.module, (f.v2_names + f.v1_names)[0])):
        if face.module != module:
            module = face.module
            out += [f"## `{module}`", "", _first_paragraph(sys.modules[module].__doc__), ""]
        out += _entry(face)
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
