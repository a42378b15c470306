"""The package's import graph has no cycles: imports run one way, so any module can be
imported first. The graph is read statically (ast) from every module, counting imports
inside functions too (a lazy import is still a dependency) but not ``if TYPE_CHECKING:``
blocks; ``from pkg import name`` depends on ``pkg.name`` when that is a module, else on
``pkg``."""

import ast
import pathlib

import sculler

ROOT = pathlib.Path(sculler.__file__).parent
PACKAGE = "sculler"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """``module -> modules of this package it imports``."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            for target in targets:
                while target and target not in files:  # import a.b.c of a package
                    target = target.rpartition(".")[0]
                if target.startswith(PACKAGE) and target != mod:
                    graph[mod].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component with a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(root: str) -> None:  # iterative Tarjan
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    components.append(component)

    for mod in sorted(graph):
        if mod not in index:
            visit(mod)
    return [_cycle_in(set(c), graph) for c in components]


def _cycle_in(component: set[str], graph: dict[str, set[str]]) -> list[str]:
    start = min(component)
    parents = {start: None}
    queue = [start]
    while queue:  # breadth-first back to start inside the component: a shortest cycle
        node = queue.pop(0)
        for child in sorted(graph[node] & component):
            if child == start:
                path = [node]
                while parents[path[-1]] is not None:
                    path.append(parents[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, node,
                                                                                   start]
            if child not in parents:
                parents[child] = node
                queue.append(child)
    return sorted(component)


def test_the_package_has_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles (break each so imports run one way):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def test_the_checker_finds_and_names_a_cycle():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}, "p.e": set()}
    assert find_cycles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
    assert find_cycles({"p.a": {"p.b"}, "p.b": set()}) == []
    graph = import_graph()
    assert "sculler.core.layer" in graph["sculler.layers.fc"]
    assert "sculler.core.model_config" in graph["sculler.core.layer"]
