"""Hypothesis runs derandomized by default, so a CI run draws the same examples every time and a green main
stays green; `HYPOTHESIS_PROFILE=explore` draws fresh random examples (and more of them) to hunt for new edges."""
from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The matplotlib Figures saved while the test runs (each `Figure.savefig` call still writes its file)."""
    import matplotlib.figure  # only the plotting tests pay for matplotlib

    seen, real = [], matplotlib.figure.Figure.savefig

    def spy(fig, path, *a, **k):
        seen.append(fig)
        return real(fig, path, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    return seen
