"""The import graph of ``hif4spec``, ``sim`` and ``hwgen`` against the layering.

    0 utilities      sim.progress, sim.tools (no project imports)
    1 spec           hif4spec
    2 golden model   sim.formats, sim.dot, sim.stimulus
    3 siblings       hwgen | verification (sim.bench, sim.formal)
                     | cost (sim.cost, sim.area_model, sim.cyclesim) | rl (sim.rl)
    4 sweep          sim.sweep
    5 CLI            sim.cli

A module may import its own component and the layers below it; between the siblings of
layer 3 only the edges of :data:`SIBLING_EDGES`. Every import counts: the graph is read from
every ``import`` statement of every module's source, those inside functions included. No
cycle of modules, and no cycle of packages (a module stands for its package: ``sim.cost``,
``sim.rl``, ...). A fresh interpreter imports every module, which must work (except the
cocotb test module, which runs inside a simulator, and ``__main__`` scripts), and shows that
importing ``hif4spec`` loads no NumPy and the golden model none of Amaranth, cocotb and
torch.
"""

import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hif4spec", "sim", "hwgen")
#: cocotb test modules: imported by the simulator only (they need its ``cocotb`` runtime).
IN_SIMULATOR = {"sim.bench.tb"}

#: component -> (layer, module prefixes)
COMPONENTS = {
    "utilities": (0, ("sim.progress", "sim.tools")),
    "spec": (1, ("hif4spec",)),
    "golden": (2, ("sim.formats", "sim.dot", "sim.stimulus")),
    "hwgen": (3, ("hwgen",)),
    "verification": (3, ("sim.bench", "sim.formal")),
    "cost": (3, ("sim.cost", "sim.area_model", "sim.cyclesim")),
    "rl": (3, ("sim.rl",)),
    "sweep": (4, ("sim.sweep",)),
    "cli": (5, ("sim.cli",)),
}

#: The imports allowed between siblings of one layer: (importer component, imported module
#: prefix) -> why.
SIBLING_EDGES = {
    ("verification", "hwgen"): "the benches and proofs build the units they check",
    ("verification", "sim.cyclesim"): "the RTL cycle checks (sim.bench.rtlcheck) compare the "
                                      "Verilated unit with the cycle-level model",
    ("verification", "sim.cost.synth"): "a proof on the native Yosys first checks that it is "
                                        "the synthesis flow's build (check_native)",
}


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


def component(name):
    """The component of module ``name`` (None: none, which only the ``sim`` package is)."""
    for comp, (_, prefixes) in COMPONENTS.items():
        if _within(name, prefixes):
            return comp
    return None


def layer(name):
    comp = component(name)
    return None if comp is None else COMPONENTS[comp][0]


def imports(source, name, is_package=False):
    """Every module ``name`` imports, absolute names, from any depth of ``source``
    (function bodies, ``if`` and ``try`` blocks included)."""
    package = name if is_package else name.rpartition(".")[0]
    out = set()
    with warnings.catch_warnings():         # a string's escapes are not the question here
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
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


GRAPH = {name: imports(path.read_text(), name, path.name == "__init__.py")
         for name, path in MODULES.items()}


def _ours(name):
    return name.split(".")[0] in PACKAGES


def _edges():
    return {(m, t) for m, ts in GRAPH.items() for t in ts if _ours(t) and t != m}


def test_every_module_has_a_component():
    assert [m for m in MODULES if component(m) is None] == ["sim"]


def test_sim_package_imports_nothing():
    """``import sim.x`` runs ``sim/__init__.py`` first: it must stay empty of imports."""
    assert GRAPH["sim"] == set()


def test_spec_imports_only_the_standard_library():
    bad = {(m, t) for m, ts in GRAPH.items() if component(m) == "spec" for t in ts
           if not _within(t, ("hif4spec",)) and t.split(".")[0] not in sys.stdlib_module_names}
    assert not bad, sorted(bad)


def test_utilities_import_nothing_of_the_project():
    bad = {(m, t) for m, t in _edges() if component(m) == "utilities"}
    assert not bad, sorted(bad)


def _against_layering(edges):
    bad = []
    for m, t in edges:
        cm, ct = component(m), component(t)
        if cm is None or ct is None or cm == ct:
            continue
        lm, lt = COMPONENTS[cm][0], COMPONENTS[ct][0]
        if lt > lm or (lt == lm and not any(cm == c and _within(t, (p,))
                                            for c, p in SIBLING_EDGES)):
            bad.append(f"{m} -> {t}")
    return sorted(bad)


def test_layering():
    bad = _against_layering(_edges())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_sibling_edges_are_between_siblings_and_acyclic():
    comps = set()
    for comp, prefix in SIBLING_EDGES:
        target = component(prefix)
        assert COMPONENTS[comp][0] == COMPONENTS[target][0] and comp != target
        comps.add((comp, target))
    graph = {}
    for a, b in comps:
        graph.setdefault(a, set()).add(b)
    assert _cycles(graph) == []


def _cycles(graph):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return sorted(out)


def _package(name):
    """The package a module stands for in the package graph: ``sim.cost.energy`` ->
    ``sim.cost``, ``sim.dot`` -> ``sim.dot``, ``hwgen.units`` -> ``hwgen``."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "sim" else parts[0]


def test_no_import_cycles_of_modules():
    graph = {m: set() for m in MODULES}
    for m, t in _edges():
        graph[m].add(t)
    assert _cycles(graph) == []


def test_no_import_cycles_of_packages():
    graph = {}
    for m, t in _edges():
        graph.setdefault(_package(m), set())
        if _package(t) != _package(m):
            graph[_package(m)].add(_package(t))
    assert _cycles(graph) == []


def test_cycle_finder_is_not_blind():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_scanner_sees_lazy_imports():
    """An import inside a function (or under ``if``/``try``) is an edge like any other,
    and one such edge upwards is a layering error and closes a cycle."""
    source = ("import numpy\n"
              "def f():\n"
              "    if True:\n"
              "        try:\n"
              "            from .gemm_torch import gemm_torch\n"
              "        except ImportError:\n"
              "            pass\n"
              "    from sim.sweep import run_tasks\n")
    found = imports(source, "sim.dot")
    assert {"sim.gemm_torch", "sim.sweep"} <= found
    assert _against_layering({("sim.dot", t) for t in found if _ours(t)}) == [
        "sim.dot -> sim.sweep"]
    graph = {"sim.dot": found, "sim.gemm_torch": {"sim.dot"}}
    assert _cycles(graph) == [["sim.dot", "sim.gemm_torch"]]


def test_layering_sees_the_forbidden_sibling_edges():
    """cost must not import hwgen, rl or verification; rl must not import sweep."""
    assert _against_layering({("sim.cost.energy", "sim.rl.minilm"),
                              ("sim.cost.estimate", "hwgen.units"),
                              ("sim.cost.table", "sim.bench.runner"),
                              ("sim.cost.isofreq", "sim.sweep"),
                              ("sim.rl.grpo", "sim.sweep"),
                              ("sim.bench.rtlcheck", "sim.cyclesim"),
                              ("sim.formal", "hwgen.units")}) == [
        "sim.cost.energy -> sim.rl.minilm", "sim.cost.estimate -> hwgen.units",
        "sim.cost.isofreq -> sim.sweep", "sim.cost.table -> sim.bench.runner",
        "sim.rl.grpo -> sim.sweep"]


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
    golden = [m for m in MODULES if component(m) == "golden"]
    out = _fresh({"spec": ["hif4spec"], "golden": golden})
    assert out["failed"] == {}
    assert "numpy" not in out["spec"]
    assert not {"amaranth", "cocotb", "cocotb_tools", "torch", "transformers",
                "hwgen"} & set(out["golden"])


def test_every_module_imports_in_a_fresh_interpreter():
    names = [m for m in MODULES if m not in IN_SIMULATOR and not m.endswith(".__main__")]
    assert _fresh({"all": names})["failed"] == {}
