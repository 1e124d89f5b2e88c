"""Emulated cluster: one Linux network namespace per host, bridges as switches, tbf-shaped links."""
from simdist.validation.emulab.cluster import EmulabError, EmulatedCluster, check_privileges, cleanup_stale
from simdist.validation.emulab.layout import GOODPUT_FACTOR, EmulabLayout

__all__ = [
    "EmulabError", "EmulatedCluster", "EmulabLayout", "GOODPUT_FACTOR", "check_privileges", "cleanup_stale",
]
