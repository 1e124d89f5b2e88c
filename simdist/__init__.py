"""simdist: a discrete-event simulator and performance planner for distributed DL training.

The Python API (docs/api.md): `simdist.load(path_or_dict, overrides=...)`, `simdist.simulate(scenario)`,
`simdist.estimate(scenario)` -> `simdist.Result`; `simdist.breakeven` (codecs vs NIC bandwidth);
`simdist.sweep` (a resumable sweep over scenario keys, docs/planner.md); `simdist.validate_published`
(the published-benchmark suite, as `simdist validate --published`). They are imported on first use (module `__getattr__`),
so `import simdist` loads neither the schema (pydantic, yaml) nor the engine.
"""
__version__ = "0.1.0"  # the one source of the version: pyproject.toml reads it (tool.setuptools.dynamic)

import os as _os
import sys as _sys

# numpy's bundled OpenBLAS starts a thread per core when numpy is imported, and those threads cost more
# CPU at start-up (~0.05 s here) than simdist ever gets back: it runs no large matrix products. One
# BLAS thread unless the user chose otherwise, and only when numpy is not loaded yet (after that the
# variable has no effect). docs/performance.md, "Start-up and the 1,024-GPU point".
if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
