"""Direct fabrics: ring and 2D/3D tori whose vertices are the machines themselves.

Machine i sits at the row-major position i of `dims` (last dimension fastest). NIC m of a machine is
cabled with `fabric.link` to NIC m of its neighbours (one torus "plane" per NIC), wrap-around
included; a dimension of size 2 gives two cables to the same neighbour (an edge of multiplicity 2).
Default shape: the most balanced exact factorisation of the machine count; when that is lopsided
(longest/shortest side > 4, e.g. a prime count) a near-square/cube shape with the last positions left
empty is used instead, and each line of the torus then closes its ring over the occupied positions.
"""
from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from simdist.hardware.specs import FabricSpec, TopologyKind
from simdist.topology.machines import Machine, add_link

if TYPE_CHECKING:
    from simdist.topology.plain import LinkGraph

NDIMS = {TopologyKind.RING: 1, TopologyKind.TORUS2D: 2, TopologyKind.TORUS3D: 3}
MAX_ASPECT = 4


def _factorisations(n: int, k: int, smallest: int = 1) -> list[tuple[int, ...]]:
    if k == 1:
        return [(n,)] if n >= smallest else []
    out = []
    for d in range(smallest, math.isqrt(n) + 1 if k == 2 else int(round(n ** (1 / k))) + 2):
        if n % d == 0:
            out.extend((d,) + rest for rest in _factorisations(n // d, k - 1, d))
    return out


def default_dims(n: int, ndims: int) -> tuple[int, ...]:
    """A near-square (2D) or near-cube (3D) shape holding `n` machines, longest side first."""
    n = max(1, n)
    if ndims == 1:
        return (n,)
    exact = [f for f in _factorisations(n, ndims) if len(f) == ndims]
    if exact:
        best = min(exact, key=lambda f: (max(f) / min(f), f))
        if max(best) / min(best) <= MAX_ASPECT:
            return tuple(sorted(best, reverse=True))
    return tuple(sorted(_near(n, ndims), reverse=True))


def _near(n: int, ndims: int) -> tuple[int, ...]:
    if ndims == 1:
        return (n,)
    side = math.ceil(round(n ** (1 / ndims), 9))
    return (side, *_near(math.ceil(n / side), ndims - 1))


def shape_for(fabric: FabricSpec, n: int) -> tuple[int, ...]:
    """The torus shape used for `n` machines: fabric.dims, else the default."""
    ndims = NDIMS[TopologyKind(fabric.topology)]
    if fabric.topology == TopologyKind.RING:
        return (n,)
    return tuple(fabric.dims) if fabric.dims else default_dims(n, ndims)


def build_direct(g: LinkGraph, fabric: FabricSpec, machines: list[Machine]) -> str:
    """Ring or torus over the machines (see module rules)."""
    dims = shape_for(fabric, len(machines))
    n = len(machines)
    planes = max((len(m.nics) for m in machines), default=0)
    strides = [math.prod(dims[d + 1:]) for d in range(len(dims))]
    for d, size in enumerate(dims):
        others = [range(s) for e, s in enumerate(dims) if e != d]
        for rest in itertools.product(*others):
            line = []
            for c in range(size):
                coords = list(rest)
                coords.insert(d, c)
                idx = sum(x * s for x, s in zip(coords, strides))
                if idx < n:
                    line.append(idx)
            if len(line) < 2:
                continue
            for j, a in enumerate(line):
                b = line[(j + 1) % len(line)]
                for p in range(planes):
                    ma, mb = machines[a], machines[b]
                    if ma.nics and mb.nics:
                        add_link(g, ma.nics[p % len(ma.nics)], mb.nics[p % len(mb.nics)], fabric.link, "fabric")
    kind = "ring" if len(dims) == 1 else f"torus{len(dims)}d"
    g.graph["fabric"] = {"kind": kind, "dims": dims, "planes": planes, "complete": math.prod(dims) == n}
    shape = "x".join(map(str, dims))
    return f"{kind} {shape} over {n} machines, {planes} plane(s)"
