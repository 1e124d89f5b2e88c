"""The dependency direction of DESIGN.md section 2, enforced on the source (AST) and at import time."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import simdist

ROOT = Path(simdist.__file__).parent

# module prefix -> layer; a module may import only from layers <= its own (same package allowed).
LAYERS = {
    "simdist.units": 0, "simdist.errors": 0, "simdist.tables": 0, "simdist.progress": 0,
    "simdist.hardware": 1, "simdist.workload": 1, "simdist.results.records": 1,
    "simdist.topology": 2, "simdist.collectives": 2, "simdist.compression": 2, "simdist.scenario": 2,
    "simdist.compute": 2, "simdist.memory": 2, "simdist.input_pipeline": 2,
    "simdist.cluster": 3, "simdist.network": 3, "simdist.layout": 3, "simdist.graph": 3,
    "simdist.strategies": 4, "simdist.failures": 4,
    "simdist.results": 5,
    "simdist.engine": 6,
    "simdist.planner": 7, "simdist.compare": 7,
    "simdist.io": 8, "simdist.plots": 8, "simdist.plots_goodput": 8, "simdist.plots_mp": 8, "simdist.report": 8, "simdist.api": 8, "simdist.figures": 8,
    "simdist.cli": 9,
}
HEAVY = ("yaml", "pydantic", "matplotlib", "click", "typer", "ray", "torch")
# modules allowed to import heavy libraries (lazily or not)
HEAVY_OK = ("simdist.io", "simdist.api", "simdist.plots", "simdist.plots_goodput", "simdist.plots_mp", "simdist.figures", "simdist.cli", "simdist.workload.torch_import", "simdist.planner.ray")


def _layer(module: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


def _imports(path: Path, module: str) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the package
                base = module.split(".")[: -node.level] if not path.name == "__init__.py" else module.split(".")[: len(module.split(".")) - node.level + 1]
                names.append(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                names.append(node.module)
                names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_every_module_has_a_layer():
    missing = [m for m, _ in _modules() if m != "simdist" and _layer(m) is None]
    assert not missing, f"add these modules to LAYERS (and DESIGN.md's map): {missing}"


def test_imports_follow_the_layers():
    bad = []
    for module, path in _modules():
        mine = _layer(module)
        if mine is None:
            continue
        for name in _imports(path, module):
            if name.startswith("simdist."):
                theirs = _layer(name)
                if theirs is not None and theirs > mine:
                    bad.append(f"{module} (layer {mine}) imports {name} (layer {theirs})")
            elif name.split(".")[0] in HEAVY and not module.startswith(HEAVY_OK):
                bad.append(f"{module} imports {name}")
    assert not bad, "\n".join(bad)


def test_core_imports_without_heavy_libraries():
    core = [m for m, _ in _modules() if not m.startswith(HEAVY_OK) and m not in ("simdist.report", "simdist.tables")]
    code = (
        "import sys, importlib\n"
        f"for m in {core!r}: importlib.import_module(m)\n"
        f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
