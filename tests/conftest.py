"""Hypothesis runs derandomized by default, so a CI run draws the same examples every time and a green main
stays green; `HYPOTHESIS_PROFILE=explore` draws fresh random examples (and more of them) to hunt for new edges."""
from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
