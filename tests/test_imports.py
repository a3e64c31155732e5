"""The import graph of ``hif4spec``, ``sim`` and ``hwgen`` against the layering.

    hif4spec  ->  golden model  ->  hwgen, sim.bench, sim.cost, sim.cyclesim,  ->  sim.cli
                  (sim.formats,     sim.area_model, sim.rl, sim.progress,
                   sim.dot,         sim.formal
                   sim.stimulus)

A module may import its own layer and the layers to its left; ``hwgen`` may import only
``hif4spec``, the golden model and itself; no import cycle, also not through imports inside
functions, except the optional back ends in ``LAZY_BACKENDS`` (imported inside a golden
function only when asked for). The graph is read from every module's source (every
``import`` statement, function-level ones included); a fresh interpreter imports every
module, which must work (except the cocotb test modules, which run inside a simulator, and
``__main__`` scripts), and shows that importing ``hif4spec`` loads no NumPy and the golden
model none of Amaranth, cocotb and torch.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hif4spec", "sim", "hwgen")
#: cocotb test modules: imported by the simulator only (they need its ``cocotb`` runtime).
IN_SIMULATOR = {"sim.bench.tb"}
GOLDEN = ("sim.formats", "sim.dot", "sim.stimulus")
MIDDLE = ("hwgen", "sim.bench", "sim.cost", "sim.cyclesim", "sim.area_model", "sim.rl",
          "sim.progress", "sim.formal", "sim.gemm_torch", "sim.sweep")
#: (importer, back end): sim.dot.gemm(backend="torch") imports its torch back end lazily.
LAZY_BACKENDS = {("sim.dot", "sim.gemm_torch")}


def _modules():
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _within(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer(name):
    """0 spec, 1 golden model, 2 generators/benches/cost models, 3 CLI (None: outside)."""
    if _within(name, ("hif4spec",)):
        return 0
    if _within(name, GOLDEN):
        return 1
    if _within(name, MIDDLE):
        return 2
    if _within(name, ("sim.cli",)):
        return 3
    return None


def _imports(name, path):
    """Every module ``name`` imports (absolute names, any depth in the source)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                out.add(sub if sub in MODULES else mod)
    return out


GRAPH = {name: _imports(name, path) - {t for m, t in LAZY_BACKENDS if m == name}
         for name, path in MODULES.items()}


def _ours(name):
    return name.split(".")[0] in PACKAGES


def test_spec_imports_only_the_standard_library():
    bad = {(m, t) for m, ts in GRAPH.items() if layer(m) == 0 for t in ts
           if not _within(t, ("hif4spec",)) and t.split(".")[0] not in sys.stdlib_module_names}
    assert not bad, sorted(bad)


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if layer(m) is None and m not in ("sim",)]


def test_layering():
    bad = []
    for m, targets in GRAPH.items():
        for t in targets:
            if not _ours(t) or layer(m) is None or t == "sim":
                continue
            if layer(t) > layer(m) or (_within(m, ("hwgen",)) and layer(t) == 2
                                       and not _within(t, ("hwgen",))):
                bad.append(f"{m} -> {t}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    graph = {m: {t for t in ts if _ours(t)} for m, ts in GRAPH.items()}
    assert _cycles(graph) == []


def test_cycle_finder_is_not_blind():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


_PROBE = """
import importlib, json, sys
out = {"failed": {}}
for group, names in json.loads(sys.argv[1]).items():
    before = set(sys.modules)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            out["failed"][name] = f"{type(exc).__name__}: {exc}"
    out[group] = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(json.dumps(out))
"""


def _fresh(groups):
    """Import ``groups`` ({label: [module, ...]}) in order in one fresh interpreter; returns
    the top-level packages each group loaded and the modules that failed to import."""
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(groups)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_spec_and_golden_model_import_no_heavy_dependencies():
    golden = [m for m in MODULES if layer(m) == 1]
    out = _fresh({"spec": ["hif4spec"], "golden": golden})
    assert out["failed"] == {}
    assert "numpy" not in out["spec"]
    assert not {"amaranth", "cocotb", "cocotb_tools", "torch", "hwgen"} & set(out["golden"])


def test_every_module_imports_in_a_fresh_interpreter():
    names = [m for m in MODULES if m not in IN_SIMULATOR and not m.endswith(".__main__")]
    assert _fresh({"all": names})["failed"] == {}
