"""The dependency direction of docs/architecture.md's layer table, enforced on the source (AST) and at import time.

Every import statement counts, at module level, under `if TYPE_CHECKING:` (a type is a dependency) or inside
a function, relative ones resolved, in simdist/
(cli.py and api.py included) and in the validation package (the repository's validation/ folder, installed as
`simdist.validation`, on the top layer). The tests fail on

- an upward import (a module importing a higher layer than its own), except `simdist.validation` reached
  lazily (inside a function, or through simdist/__init__.py's LAZY_MODULES) by the `validate`/`calibrate`
  verbs of cli.py and api.py (`LAZY_TOP_LAYER`);
- an import cycle between modules that is not in `KNOWN_CYCLES`, and on a cycle in that list that is gone:
  the list must equal what is found, so it shrinks with every cycle broken, and it must reach empty;
- more function-local imports of simdist's own modules than `FUNCTION_LOCAL_CEILING` (today's count: lower it
  as imports move to the top; the one lazy-loading mechanism is simdist/__init__.py's LAZY_MODULES);
- an import of a top-level `validation` package (a second copy of simdist.validation from a checkout), in
  the package, the tests, the benchmarks or the notebooks;
- a heavy library (yaml, pydantic, matplotlib, click, ray, torch) imported by the core, statically or at import.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import simdist
import simdist.validation

ROOT = Path(simdist.__file__).parent
VALIDATION_ROOT = Path(simdist.validation.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

HEAVY = ("yaml", "pydantic", "matplotlib", "click", "typer", "ray", "torch")
# modules allowed to import heavy libraries (lazily or not)
HEAVY_OK = ("simdist.io", "simdist.api", "simdist.plots", "simdist.plots_goodput", "simdist.plots_mp",
            "simdist.figures", "simdist.cli", "simdist.workload.torch_import", "simdist.planner.ray",
            "simdist.validation")

# (importer, imported package) pairs allowed to import upward, and only lazily (inside a function, or a module
# that simdist.LAZY_MODULES loads on first use): the verbs that run the validation harness or the published suite.
LAZY_TOP_LAYER = {("simdist.cli", "simdist.validation"), ("simdist.api", "simdist.validation")}

# Import cycles (strongly connected components of the module graph, function-local imports included) that
# exist today. This list must reach empty: break a cycle, then delete its entry (the test fails until you do).
KNOWN_CYCLES: list[tuple[str, ...]] = []

# Function-local imports of simdist modules (statements inside a function body), in simdist/ and in
# simdist.validation: today's counts. Lower them as imports move to module level; never raise them.
FUNCTION_LOCAL_CEILING = 0
VALIDATION_FUNCTION_LOCAL_CEILING = 24


@dataclass(frozen=True)
class Import:
    """One imported simdist module (the most specific module that exists) and where the import sits."""

    target: str
    line: int
    in_function: bool


def layers_from_architecture() -> dict[str, int]:
    """module prefix -> layer, read from the table in docs/architecture.md (its second column's `names`)."""
    layers = {}
    for row in ARCHITECTURE.read_text().splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", row)
        if not m:
            continue
        for token in re.findall(r"`([^`]+)`", m.group(2)):
            name = token.removesuffix("/").removesuffix(".py").replace("/", ".")
            layers[f"simdist.{name}"] = int(m.group(1))
    return layers


LAYERS = layers_from_architecture()


def _layer(module: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def _modules() -> dict[str, Path]:
    """Dotted module name -> source file, for simdist/ and the validation package."""
    out = {}
    for base, package in ((ROOT, "simdist"), (VALIDATION_ROOT, "simdist.validation")):
        for path in sorted(base.rglob("*.py")):
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _known(name: str) -> str | None:
    """The most specific existing simdist module that `name` (a module, or a module's attribute) names."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _function_lines(tree: ast.AST) -> set[int]:
    """Line numbers of import statements that sit inside a function body."""
    lines = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lines |= {n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def imported_names(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """Every name an import statement of the module brings in, absolute: (name, line, inside a function)."""
    tree = ast.parse(path.read_text())
    local = _function_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, node.lineno in local) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for a in node.names:  # `from pkg import mod` names the module; `from mod import name`, the module
                name = f"{source}.{a.name}"
                out.append((name if a.name != "*" and name in MODULES else source, node.lineno, node.lineno in local))
    return out


def internal_imports(module: str) -> list[Import]:
    """The simdist modules a module imports, one per statement and target."""
    seen, out = set(), []
    for name, line, in_function in imported_names(module, MODULES[module]):
        target = _known(name) if name.split(".")[0] == "simdist" else None
        if target and target != module and (target, line) not in seen:
            seen.add((target, line))
            out.append(Import(target, line, in_function))
    return out


def import_graph() -> dict[str, set[str]]:
    return {m: {i.target for i in internal_imports(m)} for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan), each sorted, the list sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def function_local_count(prefix_in: str, prefix_out: str | None = None) -> int:
    """Function-local import statements of simdist modules in modules under `prefix_in` (not `prefix_out`)."""
    total = 0
    for module in MODULES:
        if module.startswith(prefix_in) and not (prefix_out and module.startswith(prefix_out)):
            total += len({i.line for i in internal_imports(module) if i.in_function})
    return total


def test_the_architecture_table_parses():
    assert LAYERS["simdist.units"] == 0 and LAYERS["simdist.cli"] == max(
        v for k, v in LAYERS.items() if k != "simdist.validation")
    assert LAYERS["simdist.validation"] > LAYERS["simdist.cli"], "validation sits above the public API and CLI"


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if m != "simdist" and _layer(m) is None]
    assert not missing, f"add these modules to docs/architecture.md's layer table: {missing}"


def test_imports_follow_the_layers():
    bad = []
    for module in MODULES:
        mine = _layer(module)
        if mine is None:
            continue
        for imp in internal_imports(module):
            theirs = _layer(imp.target)
            if theirs is None or theirs <= mine:
                continue
            lazy_ok = (imp.in_function or is_lazy(imp.target)) and any(module == a and (imp.target == b or imp.target.startswith(b + "."))
                                              for a, b in LAZY_TOP_LAYER)
            if not lazy_ok:
                bad.append(f"{module}:{imp.line} (layer {mine}) imports {imp.target} (layer {theirs})")
        for name, line, _ in imported_names(module, MODULES[module]):
            if name.split(".")[0] in HEAVY and not module.startswith(HEAVY_OK):
                bad.append(f"{module}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def is_lazy(module: str) -> bool:
    """Whether simdist/__init__.py's finder loads `module` on first use (a module of LAZY_MODULES, not a package)."""
    return MODULES[module].name != "__init__.py" and any(
        module == m or module.startswith(m + ".") for m in simdist.LAZY_MODULES)


def _top_level_validation(source: str) -> list[tuple[str, int]]:
    """(name, line) of every absolute import of a top-level `validation` package in Python source."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        out += [(n, node.lineno) for n in names if n == "validation" or n.startswith("validation.")]
    return out


def test_nothing_imports_a_top_level_validation_package():
    """Not the package, the tests, the benchmarks nor the notebooks: a checkout's validation/ imported as
    `validation` would be a second copy of simdist.validation's modules."""
    repo = ARCHITECTURE.parents[1]
    sources = {str(path): path.read_text() for path in MODULES.values()}
    for folder in ("tests", "benchmarks"):
        sources |= {str(p): p.read_text() for p in (repo / folder).rglob("*.py") if "__pycache__" not in p.parts}
    for nb in (repo / "notebooks").glob("*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        sources[str(nb)] = "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!")))
    bad = [f"{where}:{line} imports {name}" for where, text in sources.items()
           for name, line in _top_level_validation(text)]
    assert not bad, "import simdist.validation, not validation:\n" + "\n".join(bad)


def test_import_cycles_are_exactly_the_known_ones():
    found = cycles(import_graph())
    new = [c for c in found if c not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert not new, f"new import cycle(s) (function-local imports count): {new}"
    assert not gone, f"cycle(s) broken: delete them from KNOWN_CYCLES: {gone}"
    assert found == sorted(KNOWN_CYCLES)


def test_function_local_imports_stay_under_the_ceiling():
    core = function_local_count("simdist", "simdist.validation")
    harness = function_local_count("simdist.validation")
    assert core <= FUNCTION_LOCAL_CEILING, (
        f"{core} function-local imports of simdist modules in simdist/ (ceiling {FUNCTION_LOCAL_CEILING}): "
        "import at module level (a module only some verbs need: add it to simdist.LAZY_MODULES)")
    assert harness <= VALIDATION_FUNCTION_LOCAL_CEILING, (
        f"{harness} in simdist.validation (ceiling {VALIDATION_FUNCTION_LOCAL_CEILING})")


def test_the_cycle_finder_finds_a_cycle():
    """The checks above cannot pass by a finder that finds nothing."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [("a", "b", "c")]


def test_top_level_validation_imports_are_found():
    source = "from validation import x\nimport validation.cases\nfrom simdist.validation import y\nfrom . import validation\n"
    assert _top_level_validation(source) == [("validation", 1), ("validation.cases", 2)]


def test_relative_and_function_local_imports_are_read():
    names = imported_names("simdist.validation.published.runner", MODULES["simdist.validation.published.runner"])
    assert any(n == "simdist.validation.published.cases" for n, _, _ in names)
    assert any(local for n, _, local in names if n.startswith("simdist.progress"))


def test_core_imports_without_heavy_libraries():
    core = [m for m in MODULES if not m.startswith(HEAVY_OK) and m not in ("simdist.report", "simdist.tables")]
    code = (
        "import sys, importlib\n"
        f"for m in {core!r}: importlib.import_module(m)\n"
        f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_lazy_modules_load_on_first_use():
    """`import simdist.cli` binds the verbs' modules without running them; the first attribute read runs one;
    `python -m` still runs a lazy module."""
    code = ("import sys, simdist.cli\n"
            "ran = lambda m: m in sys.modules and type(sys.modules[m]).__name__ == 'module'\n"
            "print(*(ran(m) for m in ('simdist.plots', 'simdist.planner.plan', 'simdist.io.load', 'pydantic')))\n"
            "simdist.cli.scenario_load.load_scenario\n"
            "print(*(ran(m) for m in ('simdist.plots', 'simdist.io.load', 'pydantic')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"] * 4 + ["False", "True", "True"]
    run = subprocess.run([sys.executable, "-m", "simdist.validation.worker", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "usage" in run.stdout


def test_simdist_imports_run_with_the_collector_paused_and_pin_nothing():
    """simdist/__init__.py's finder runs every simdist module's code with the cyclic collector off (no
    collection while the schema, pydantic and numpy import), then turns it back on with nothing frozen; objects
    frozen before (a run's, the user's) stay frozen; a collector the user turned off stays off."""
    # a collection counts when a simdist module's own code is running (a `<module>` frame in simdist/): the import
    # system's search for a module, before its code runs, may trigger one wherever the allocation count stands
    code = ("import gc, sys, simdist\n"
            "seen = []\n"
            "def inside(frame):\n"
            "    while frame is not None:\n"
            "        if frame.f_code.co_name == '<module>' and '/simdist/' in frame.f_code.co_filename:\n"
            "            return True\n"
            "        frame = frame.f_back\n"
            "    return False\n"
            "gc.callbacks.append(lambda phase, info: seen.append(info['generation'])\n"
            "                   if phase == 'start' and inside(sys._getframe()) else None)\n"
            "import simdist.io.schema\n"
            "print(len(seen), gc.isenabled(), gc.get_freeze_count())\n"
            "frozen = [[]]\n"
            "gc.freeze()\n"
            "kept = gc.get_freeze_count()\n"
            "import simdist.io.load as load\n"
            "load.load_scenario\n"
            "print(gc.get_freeze_count() == kept)\n"
            "gc.unfreeze()\n"
            "gc.disable()\n"
            "import simdist.engine.simulation as s\n"
            "s.simulate\n"
            "print(gc.isenabled())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True", "0", "True", "False"]


def test_a_lazy_module_imported_twice_stays_unloaded_until_read():
    """A second `import x as y` of a lazy module (the import system reads its `__spec__`) does not run it; the
    first attribute read does."""
    code = ("import sys, simdist\n"
            "import simdist.strategies.tensor_parallel as a\n"
            "import simdist.strategies.tensor_parallel as b\n"
            "from simdist.strategies import tensor_parallel as c\n"
            "kind = lambda: type(sys.modules['simdist.strategies.tensor_parallel']).__name__\n"
            "print(kind(), a is b is c)\n"
            "a.TpRole\n"
            "print(kind(), b.TpRole is c.TpRole)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["_LazyModule", "True", "module", "True"]
