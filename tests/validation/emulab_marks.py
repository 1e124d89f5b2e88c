"""One place that decides whether the emulated cluster can run here (root, `ip`, `tc`, namespaces)."""
from __future__ import annotations

import pytest

from simdist.validation.emulab import EmulabError, check_privileges


def _emulab_available() -> str | None:
    try:
        check_privileges()
    except EmulabError as e:
        return str(e)
    return None


WHY_NOT = _emulab_available()  # None where namespaces can be made


def needs_emulab(fn):
    """Mark slow + emulab, and skip with the one-line reason where namespaces are unavailable."""
    skip = pytest.mark.skipif(WHY_NOT is not None, reason=f"no emulated cluster: {WHY_NOT}")
    return pytest.mark.slow(pytest.mark.emulab(skip(fn)))
