"""Models the validation scenarios name as `{torch: "simdist.validation.models:mlp", input_shape: [...]}`.

The same MLP the DDP case trains (simdist.validation.ddp_case.build_mlp), so the simulator and the harness
see identical layers: 8 x Linear(1024, 1024) with ReLU between them, 8.40 M parameters.
"""
from __future__ import annotations

HIDDEN = 1024
DEPTH = 8


def mlp(hidden: int = HIDDEN, depth: int = DEPTH):  # -> torch.nn.Module (torch imported lazily)
    """The synthetic MLP of the DDP case: `depth` x Linear(hidden, hidden), ReLU between."""
    from simdist.validation.ddp_case import build_mlp

    return build_mlp(hidden, depth)
