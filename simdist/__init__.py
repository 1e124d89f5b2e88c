"""simdist: a discrete-event simulator and performance planner for distributed DL training.

The Python API (docs/api.md): `simdist.load(path_or_dict, overrides=...)`, `simdist.simulate(scenario)`,
`simdist.estimate(scenario)` -> `simdist.Result`; `simdist.breakeven` (codecs vs NIC bandwidth);
`simdist.sweep` (a resumable sweep over scenario keys, docs/planner.md); `simdist.validate_published`
(the published-benchmark suite, as `simdist validate --published`). They are imported on first use (module `__getattr__`),
so `import simdist` loads neither the schema (pydantic, yaml) nor the engine.
"""
__version__ = "0.1.0"  # the one source of the version: pyproject.toml reads it (tool.setuptools.dynamic)

import gc as _gc
import importlib.util as _importlib_util
import os as _os
import sys as _sys

# numpy's bundled OpenBLAS starts a thread per core when numpy is imported, and those threads cost more
# CPU at start-up (~0.05 s here) than simdist ever gets back: it runs no large matrix products. One
# BLAS thread unless the user chose otherwise, and only when numpy is not loaded yet (after that the
# variable has no effect). docs/performance.md, "Start-up and the 1,024-GPU point".
if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Modules that only some verbs need (plots and matplotlib, the planner, compare, the validation harness,
# torch and Ray, the check and sweep inputs; the scenario types, loader, engine and report, which `--help`
# does not): `import simdist.plots as plots` at the top of a module binds a module whose code runs when one of
# its attributes is first read (importlib's LazyLoader), so `run` never pays for what `plan` or `validate`
# use. The package's one lazy-loading mechanism; the layer test (tests/test_layers.py) reads these imports
# like any other. Packages themselves load as usual; a `from lazy.module import name` loads at once.
LAZY_MODULES = (
    "simdist.compare", "simdist.plots", "simdist.plots_goodput", "simdist.plots_mp", "simdist.figures",
    "simdist.planner", "simdist.validation", "simdist.workload.torch_import",
    "simdist.io.cli_options", "simdist.io.compare_input", "simdist.io.feasibility", "simdist.io.memory_hints",
    "simdist.io.sweep_check", "simdist.io.sweep_load", "simdist.io.load",
    "simdist.engine.simulation", "simdist.engine.composite", "simdist.engine.context",
    "simdist.engine.context_cache",
    "simdist.report", "simdist.results.writers", "simdist.scenario", "simdist.strategies.stragglers",
    "simdist.io.calibration", "simdist.failures.targets",
    # what io.rules_parallel reads only for tensor, pipeline and sharded data parallelism
    "simdist.strategies.mp_plan", "simdist.strategies.sharded_dp", "simdist.strategies.sharding",
    "simdist.strategies.tensor_parallel",
    # the model-parallel groups a data-parallel run never builds, and the layout of their ranks
    "simdist.engine.mp_groups", "simdist.layout",
    # the model-parallel plan's graphs, schedules and memory, which a data-parallel run never reads
    "simdist.strategies.pipeline_graph", "simdist.strategies.pipeline_schedule",
    "simdist.strategies.context_parallel", "simdist.strategies.expert_parallel", "simdist.graph.periodic",
    "simdist.network.replay",
    # the failure timeline's models, which only a run with failures reads
    "simdist.failures.costs", "simdist.failures.equivalence", "simdist.failures.montecarlo", "simdist.failures.state",
    "simdist.failures.step_time",
    # a result's records and its pricing, which building a cluster does not read
    "simdist.results.records", "simdist.results.cost",
)


def _is_lazy(module: str) -> bool:
    """Whether `module` is one of LAZY_MODULES or inside one of those packages."""
    return any(module == m or module.startswith(m + ".") for m in LAZY_MODULES)


class _LazyLoader(_importlib_util.LazyLoader):
    """LazyLoader that still answers the wrapped loader's other calls (`python -m` asks for get_code), and
    whose module stays unloaded when a second module imports it: the import system reads `__spec__` of a
    module it finds in sys.modules, and importlib's lazy module would run its code on that read."""

    def __getattr__(self, name: str):
        return getattr(self.loader, name)

    def exec_module(self, module) -> None:
        super().exec_module(module)
        lazy = type(module)  # importlib's lazy module class, whose first attribute read runs the module

        def read(self, attr: str):
            if attr == "__spec__":
                return object.__getattribute__(self, "__spec__")
            object.__setattr__(self, "__class__", lazy)  # importlib's class from here on
            return lazy.__getattribute__(self, attr)

        module.__class__ = type(lazy.__name__, (lazy,), {"__getattribute__": read})


class _CollectorPaused:
    """A simdist module's loader whose module code runs with Python's cyclic garbage collector paused.

    Importing simdist (with numpy, pydantic and simpy under it) makes ~70k objects, classes, functions
    and validators that live as long as the process; every collection their allocation triggers walks
    them again (~0.01 s at start-up, and the first full collection at 1,024 GPUs another ~0.015 s).
    The outermost simdist import runs with the collector off, then moves every object it finds
    straight to the oldest generation (gc.freeze, then gc.unfreeze: nothing is pinned, a full
    collection still examines them all) and turns the collector back on. A collector the user has
    turned off stays off, and objects frozen already (a run's, the user's) stay frozen: the import then only
    pauses it. docs/performance.md, "Where the time goes"."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def __getattr__(self, name: str):
        return getattr(self.loader, name)

    def exec_module(self, module) -> None:
        if not _gc.isenabled():  # inside an outer simdist import, or the user's choice
            self.loader.exec_module(module)
            return
        _gc.disable()
        try:
            self.loader.exec_module(module)
        finally:
            if not _gc.get_freeze_count():
                _gc.freeze()
                _gc.unfreeze()
            _gc.enable()


class _LazyFinder:
    """A meta-path finder that wraps the loader of the other finders' spec of every simdist module (not
    packages) in _CollectorPaused, and that of a lazy module in a LazyLoader too."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if not name.startswith("simdist."):
            return None
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is _LazyFinder or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.submodule_search_locations is None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _CollectorPaused(spec.loader)
                    if _is_lazy(name):
                        spec.loader = _LazyLoader(spec.loader)
                return spec
        return None


if _LazyFinder not in _sys.meta_path:
    _sys.meta_path.insert(0, _LazyFinder)

_LAZY = {  # public name -> module that defines it
    "load": "simdist.api",
    "simulate": "simdist.api",
    "estimate": "simdist.api",
    "breakeven": "simdist.api",
    "sweep": "simdist.api",
    "validate_published": "simdist.api",
    "Result": "simdist.api",
    "SimdistError": "simdist.errors",
    "ScenarioError": "simdist.errors",
    "InfeasibleError": "simdist.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        import difflib

        close = difflib.get_close_matches(name, __all__, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; the public names are {', '.join(__all__)}"
        raise AttributeError(f"module 'simdist' has no attribute {name!r}{hint}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
