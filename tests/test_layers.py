"""The architecture, checked: every module of dsort belongs to one layer, imports only its own layer
and those below (imports inside functions count too), and no group of modules imports itself in a
circle. The layers, bottom up (README, "Layout"):

engine       one device: the kernels' host side, the NumPy and CuPy engines, transfers
core         neither dask nor files: splitters (plan), runs, per-chunk functions, checks, errors
collections  dask: task building, settings, dask arrays and dataframes, their graphs
files        formats, the fixed-width file sort's graph, generators of test data
service      the Python service API, clusters, TLS, progress, the command line, the package facade
"""

import ast
from pathlib import Path

DSORT = Path(__file__).resolve().parent.parent / "dsort"

LAYERS = {
    "engine": ["dsort.engine"],
    "core": ["dsort.core"],
    "collections": ["dsort.collections"],
    "files": ["dsort.io"],
    "service": ["dsort"],  # the modules at the top: service, cluster, tls, progress, cli, the facade
}
ORDER = list(LAYERS)


def _modules() -> dict:
    out = {}
    for path in DSORT.rglob("*.py"):
        parts = path.relative_to(DSORT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def layer_of(module: str) -> str:
    """The layer of ``module``: the longest prefix any layer names (a package names its modules)."""
    best = None
    for layer, prefixes in LAYERS.items():
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (layer, p)
    assert best is not None, f"{module} is in no layer: place it in tests/test_layers.py's LAYERS"
    return best[0]


def imports(modules: dict) -> dict:
    """module -> the dsort modules it imports (anywhere in its body)."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
            for t in targets:
                while t not in modules and "." in t:
                    t = t.rpartition(".")[0]
                if t in modules and t != name and t.startswith("dsort"):
                    found.add(t)
        graph[name] = found
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert cycles(imports(_modules())) == []


def test_no_import_points_up():
    graph = imports(_modules())
    up = [
        f"{src} ({layer_of(src)}) imports {dst} ({layer_of(dst)})"
        for src, dsts in sorted(graph.items())
        for dst in sorted(dsts)
        if ORDER.index(layer_of(dst)) > ORDER.index(layer_of(src))
    ]
    assert up == []


NO_DASK = ("engine", "core")  # the layers below dask: they import neither dask nor distributed
DASK = ("dask", "distributed", "dask_cuda", "dask_cudf")


def outside_imports(path: Path) -> set:
    """The top-level packages that the module at ``path`` imports (anywhere in its body)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.partition(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found


def test_engine_and_core_import_no_dask():
    """``engine/`` and ``core/`` are "neither dask nor files" (README, "Layout"): the cluster a run
    store needs comes from above, in its config (:mod:`dsort.collections.remote`)."""
    bad = [
        f"{name} imports {', '.join(sorted(outside_imports(path) & set(DASK)))}"
        for name, path in sorted(_modules().items())
        if layer_of(name) in NO_DASK and outside_imports(path) & set(DASK)
    ]
    assert bad == []


def test_the_checks_can_fail():
    """A circle and an upward import are found where they exist."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert layer_of("dsort.engine._cuda") == "engine" and layer_of("dsort.io.parquet") == "files"
    assert layer_of("dsort") == "service" and layer_of("dsort.core.runs") == "core"
    graph = imports(_modules())
    assert "dsort.core.plan" in graph["dsort.core.chunk"] and "dsort.engine._kernels" in graph["dsort.engine._aot"]
    remote = DSORT / "collections" / "remote.py"
    assert {"dask", "distributed"} <= outside_imports(remote) and "dask" not in outside_imports(DSORT / "core" / "plan.py")
