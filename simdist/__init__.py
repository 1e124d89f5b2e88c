"""simdist: a discrete-event simulator and performance planner for distributed DL training."""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("simdist")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+local"
