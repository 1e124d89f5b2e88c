"""Start-up (docs/performance.md, "Start-up"): what a plain run imports and what `import simdist` sets.
Fresh interpreters, so the checks see exactly what a user's process loads."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from simdist.engine.state import Simulation
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity


def _run(code: str, **env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environ)
    return out.stdout.split()


def test_a_plain_run_imports_neither_networkx_nor_numpy_random():
    """Loading a scenario and simulating it on a fat tree (a built-in fabric, nothing stochastic) leaves
    networkx (~0.15 s to import) and numpy.random (~0.02 s) unimported."""
    code = ("import sys\n"
            "from simdist.io.load import load_scenario\n"
            "from simdist.engine.simulation import simulate\n"
            "simulate(load_scenario('scenarios/default.yaml', ['cluster.nodes.0.count=4']), fidelity='simulate')\n"
            "print(*(m in sys.modules for m in ('networkx', 'numpy.random')))\n")
    assert _run(code) == ["False", "False"]


def test_import_simdist_keeps_one_blas_thread_unless_told_otherwise():
    show = "import os, simdist; print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    assert _run(show) == ["1"]
    assert _run(show, OPENBLAS_NUM_THREADS="4") == ["4"]  # the user's choice stands
    late = "import os, numpy, simdist; print(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))"
    assert _run(late) == ["unset"]  # numpy already loaded: the variable would do nothing, so it is not set


def test_the_run_generator_is_made_on_first_use_with_the_same_stream():
    sc = load_scenario("scenarios/default.yaml", ["cluster.nodes.0.count=2", "run.seed=7"])
    sim = Simulation(sc, Fidelity.ESTIMATE)
    assert "rng" not in vars(sim)
    draws = sim.rng.random(4)
    assert sim.rng is sim.rng
    assert (draws == np.random.default_rng(7).random(4)).all()
