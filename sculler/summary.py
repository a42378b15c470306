"""Model summaries: one row per layer of a ModelConfig, in build order.

Each row gives the layer's name, type, output size, sequence level (0 = one vector per sample,
1 = a sequence, 2 = a nested sequence), its parameters with their shapes, and its parameter
count; the total counts each (possibly shared) parameter once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sculler.core.model_config import LayerConfig, ModelConfig

__all__ = ["LayerRow", "summarize", "format_summary"]

# Layer types whose output is one level shallower than their input (one row per sequence or
# per sub-sequence): PaddlePaddle's sequence aggregations.
AGGREGATING_TYPES = frozenset({"seqlastins", "seqfirstins", "max", "average"})


@dataclass
class LayerRow:
    """One line of a summary."""

    name: str
    type: str
    size: int
    seq_level: int
    parameters: list[tuple[str, tuple[int, ...]]]
    count: int


def _seq_level(lc: LayerConfig, levels: dict[str, int]) -> int:
    """Sequence level of ``lc``'s output from its inputs' levels (data layers: seq_type)."""
    if lc.type == "data":
        return int(lc.attrs.get("seq_type", 0))
    ins = [levels.get(n, 0) for n in lc.input_layer_names]
    if not ins:
        return 0
    if lc.type == "expand":
        return ins[-1]
    if lc.type in AGGREGATING_TYPES:
        to_sequence = lc.attrs.get("trans_type", lc.attrs.get("agg_level")) in ("seq", 1)
        return ins[0] - 1 if ins[0] > 0 and not (to_sequence and ins[0] == 2) else ins[0]
    return max(ins)


def _group_levels(model: ModelConfig) -> dict[str, tuple[str, str | None]]:
    """What sets the sequence level of a recurrent group's agents (PaddlePaddle's layout,
    where they have no inputs): a scatter agent is one row (or sub-sequence) of its in-link,
    a memory agent what boots it, a gather agent one step output per step."""
    links: dict[str, tuple[str, str | None]] = {}
    for sm in model.sub_models:
        for link in sm.in_links:
            links[link.link_name] = ("scatter", link.layer_name)
        for m in sm.memories:
            links[m.link_name] = ("boot", m.boot_layer_name)
        for link in sm.out_links:
            links[link.link_name] = ("generated" if sm.generator else "gather", link.layer_name)
    return links


def summarize(model: ModelConfig) -> list[LayerRow]:
    """The rows of ``model``'s layers, in order."""
    dims = {p.name: tuple(int(d) for d in p.dims) for p in model.parameters}
    levels: dict[str, int] = {}
    links = _group_levels(model)
    rows = []
    for lc in model.layers:
        kind, source = links.get(lc.name, (None, None))
        if kind == "scatter":
            levels[lc.name] = max(levels.get(source, 1) - 1, 0)
        elif kind == "boot":
            levels[lc.name] = levels.get(source, 0) if source else 0
        elif kind in ("gather", "generated"):
            levels[lc.name] = 1 if kind == "generated" else min(levels.get(source, 0) + 1, 2)
        else:
            levels[lc.name] = _seq_level(lc, levels)
        names = [i.input_parameter_name for i in lc.inputs if i.input_parameter_name]
        if lc.bias_parameter_name:
            names.append(lc.bias_parameter_name)
        params = [(n, dims[n]) for n in dict.fromkeys(names) if n in dims]
        count = sum(_numel(shape) for _, shape in params)
        rows.append(LayerRow(lc.name, lc.type, int(lc.size), levels[lc.name], params, count))
    return rows


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


def total_parameters(model: ModelConfig) -> int:
    """Number of scalars in ``model``'s parameters (each shared parameter once)."""
    return sum(_numel(tuple(int(d) for d in p.dims)) for p in model.parameters)


def format_summary(model: ModelConfig) -> str:
    """The summary table of ``model`` as text (a header, one line per layer or parameter,
    the total)."""
    rows = summarize(model)
    header = ("layer", "type", "size", "seq", "parameters", "count")
    lines: list[tuple[str, ...]] = []
    for r in rows:
        shown = [f"{n} {list(shape)}" for n, shape in r.parameters] or ["-"]
        lines.append((r.name, r.type, str(r.size), str(r.seq_level), shown[0],
                      f"{r.count:,}" if r.parameters else "0"))
        lines.extend(("", "", "", "", extra, "") for extra in shown[1:])
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    right = {2, 3, 5}

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    rule = "-" * len(fmt(tuple("-" * w for w in widths)))
    total, arrays = total_parameters(model), len(model.parameters)
    return "\n".join([fmt(header), rule, *(fmt(line) for line in lines), rule,
                      f"total parameters: {total:,} in {arrays} parameter "
                      f"array{'' if arrays == 1 else 's'}, {len(rows)} layers"])
