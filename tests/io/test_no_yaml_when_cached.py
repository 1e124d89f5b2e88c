"""A run whose YAML (scenario file and catalogs) is all in io.yaml_cache never imports PyYAML
(~90 M instructions of the start-up): fresh interpreters, so the check sees what a user's process loads."""
from __future__ import annotations

import os
import subprocess
import sys


def _run(code: str, cache: str) -> list[str]:
    env = dict(os.environ, SIMDIST_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return out.stdout.split()


def test_second_run_of_a_scenario_does_not_import_yaml(tmp_path):
    code = ("import sys\n"
            "from simdist.io.load import load_scenario\n"
            "sc = load_scenario('scenarios/default.yaml', [])\n"
            "print(sc.name.replace(' ', '_'), 'yaml' in sys.modules)\n")
    first = _run(code, str(tmp_path))
    second = _run(code, str(tmp_path))
    assert first[1] == "True" and second == [first[0], "False"]
    assert _run(code, "") == [first[0], "True"]  # cache off: parsed, as before
