"""Copies of a collective that the flow network moves in lockstep, found by an equitable partition.

A model-parallel call is one schedule moved onto every group of a stage at once (engine/mp_groups.py): a
thousand tp groups, pipeline pairs or dp rings, each its own chains and flow groups. Where their copies are
interchangeable, they move at one rate at every instant, and the flow network may run them as one chain whose
steps carry every copy's transfers: the same times for a fraction of the flow groups and events.

Interchangeable is decided on the run's whole set of calls (each call's union, keyed as the caller keys it), by
colour refinement of a bipartite graph: units (one copy's chain step, or one transfer of an independent step)
and the directed links they cross, with how many times. Units start coloured by their call, chain and step,
their bytes and path latencies; links by capacity, latency and per-flow caps. Each round a
unit's colour takes the multiset of (link colour, count) it crosses and the colours of its whole chain, and a
link's the multiset of (unit colour, count) crossing it, until no class splits. The result is an equitable
partition: every unit of a class crosses each link class the same number of times, and every link of a class
carries each unit class the same number of times. Units of a class start together (the same call, chain and
step, and their chains' earlier steps in classes too), so what is in flight is always a union of whole classes;
max-min water-filling then raises, saturates and freezes a class all at once (the max-min solution is unique),
so the units of a class keep one rate and end together, step after step. Copies whose units fall in the same
classes step for step are one orbit, run as one lockstep chain. This holds on any fabric with fixed routes;
the caller asks only on an undisturbed network (no failure or degraded link, one path per connection).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from simdist.network.flows import FlowNetwork


def lockstep_unions(network, built: dict, groups: dict) -> dict:
    """{(group name, op, size): its union with each orbit of copies merged} for the unions in `built` (keyed so,
    beside other entries) whose copies (`groups[name]`, one per group) merge; {} unless `network` is a flow network
    with its own routes and capacities and one path per connection."""
    if not (isinstance(network, FlowNetwork) and network.pristine and network.paths.spread == 1):
        return {}
    return lockstep_schedules(network, {key: (s, len(groups[key[0]])) for key, s in built.items()
                                        if len(key) == 3 and len(s.chains) % len(groups[key[0]]) == 0})


def lockstep_schedules(network, unions: dict) -> dict:
    """{key: the union with each orbit of copies merged} for the keys where some copies merge; `unions` maps a
    call's key to (its union schedule, the number of copies: its chains are each copy's, copy after copy; the
    copies on disjoint ranks, as a union's groups are, so a merged step gives no rank more transfers)."""
    keys = list(unions)
    slots, unit_copy, unit_chain, pairs, transfer_unit, sizes = _units(keys, unions)
    if not transfer_unit:
        return {}
    colour = _refine(network, slots, unit_chain, pairs, np.asarray(transfer_unit), np.asarray(sizes))
    out, first = {}, 0
    for key in keys:
        sched, n = unions[key]
        per_copy, first = _copy_units(unit_copy, first, n), first + n
        orbits: dict[bytes, list[int]] = {}
        for i, units in enumerate(per_copy):
            orbits.setdefault(colour[units].tobytes(), []).append(i)
        if len(orbits) < n:
            k = len(sched.chains) // n
            copies = [sched.chains[i * k:(i + 1) * k] for i in range(n)]
            out[key] = replace(sched, chains=tuple(c for orbit in orbits.values()
                                                   for c in merged([copies[i] for i in orbit])))
    return out


def merged(copies: list[tuple]) -> tuple:
    """Moved copies' chains as one set of chains: chain k's step j carries every copy's chain-k step-j transfers."""
    if len(copies) == 1:
        return copies[0]
    return tuple(tuple(replace(step, transfers=tuple(t for c in copies for t in c[k][j].transfers))
                       for j, step in enumerate(chain)) for k, chain in enumerate(copies[0]))


def _units(keys: list, unions: dict):
    """Every unit's slot (its call, chain and step), copy and chain ids, and every transfer's (src, dst), unit and
    bytes (per repetition x repeat)."""
    slots, unit_copy, unit_chain, pairs, transfer_unit, sizes = [], [], [], [], [], []
    slot_of: dict[tuple, int] = {}
    copy_id = chain_id = 0
    for q, key in enumerate(keys):
        sched, n = unions[key]
        k = len(sched.chains) // n
        for i in range(n):
            for c, chain in enumerate(sched.chains[i * k:(i + 1) * k]):
                for j, step in enumerate(chain):
                    whole = step.lockstep
                    for t, tr in enumerate(step.transfers):
                        if whole and t:
                            unit = len(slots) - 1
                        else:
                            slot = slot_of.setdefault((q, c, j), len(slot_of))
                            slots.append(slot)
                            unit_copy.append(copy_id)
                            unit_chain.append(chain_id)
                            unit = len(slots) - 1
                        pairs.append((tr.src, tr.dst))
                        transfer_unit.append(unit)
                        sizes.append(tr.size_bytes * step.repeat)
                chain_id += 1
            copy_id += 1
    return (np.asarray(slots, dtype=np.int64), np.asarray(unit_copy, dtype=np.int64),
            np.asarray(unit_chain, dtype=np.int64), pairs, transfer_unit, sizes)


def _copy_units(unit_copy: np.ndarray, first_copy: int, n: int) -> list[np.ndarray]:
    """The unit ids of copies first_copy .. first_copy + n - 1, each in order."""
    lo, hi = np.searchsorted(unit_copy, [first_copy, first_copy + n])
    ids = np.arange(lo, hi)
    return np.split(ids, np.searchsorted(unit_copy[lo:hi], np.arange(first_copy + 1, first_copy + n)))


def _ids(rows: np.ndarray) -> np.ndarray:
    """Each row's class id (equal rows, equal ids)."""
    return np.unique(rows, axis=0, return_inverse=True)[1].ravel().astype(np.int64)


def _multiset_ids(owner: np.ndarray, value: np.ndarray, owners: int) -> np.ndarray:
    """Per owner 0..owners-1 an id of the multiset of its values (equal multisets, equal ids; exact)."""
    order = np.lexsort((value, owner))
    owner, value = owner[order], value[order]
    bounds = np.searchsorted(owner, np.arange(owners + 1))
    seen: dict[bytes, int] = {}
    out = np.empty(owners, dtype=np.int64)
    for o in range(owners):
        out[o] = seen.setdefault(value[bounds[o]:bounds[o + 1]].tobytes(), len(seen))
    return out


def _refine(network, slots, unit_chain, pairs, transfer_unit, sizes) -> np.ndarray:
    """Each unit's class in the coarsest equitable partition refining the initial colours (module docstring)."""
    links = network.topology.links
    pair_ids, pair_of = np.unique(np.asarray(pairs, dtype=np.int64), axis=0, return_inverse=True)
    pair_of = pair_of.ravel()
    flat, lengths = network.paths.link_arrays([tuple(p) for p in pair_ids.tolist()])  # each distinct pair once
    starts, lengths = (np.cumsum(lengths) - lengths)[pair_of], lengths[pair_of]  # per transfer, into flat
    transfer_of = np.repeat(np.arange(len(pairs)), lengths)
    flat = flat[np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(transfer_of.size)]
    latency = np.bincount(transfer_of, weights=links.latency_s[flat], minlength=len(pairs))
    units = len(slots)
    lat_max = np.full(units, -1.0)
    np.maximum.at(lat_max, transfer_unit, latency)
    lat_sum = np.bincount(transfer_unit, weights=latency, minlength=units)
    unit_bytes = np.bincount(transfer_unit, weights=sizes, minlength=units)
    unit_colour = _ids(np.column_stack([slots.astype(float), lat_max, lat_sum, unit_bytes]))
    caps = [network.capacity_Bps, links.latency_s] + [a for a in (links.flow_cap_Bps, links.stream_cap_Bps)
                                                      if a is not None]
    link_colour = _ids(np.column_stack([np.nan_to_num(a, posinf=-1.0) for a in caps]))
    crossing = np.unique(transfer_unit[transfer_of] * len(link_colour) + flat, return_counts=True)
    cu, cl, cc = crossing[0] // len(link_colour), crossing[0] % len(link_colour), crossing[1]
    classes = (-1, -1)
    while True:
        unit_sig = _multiset_ids(cu, link_colour[cl] * (cc.max() + 1) + cc, units)
        chain_sig = _sequence_ids(unit_chain, unit_colour)
        link_sig = _multiset_ids(cl, unit_colour[cu] * (cc.max() + 1) + cc, len(link_colour))
        unit_colour = _ids(np.column_stack([unit_colour, unit_sig, chain_sig[unit_chain]]))
        link_colour = _ids(np.column_stack([link_colour, link_sig]))
        now = (int(unit_colour.max()), int(link_colour.max()))
        if now == classes:
            return unit_colour
        classes = now


def _sequence_ids(unit_chain: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Per chain an id of its units' colours in order (units of a chain are consecutive)."""
    chains = int(unit_chain.max()) + 1
    bounds = np.searchsorted(unit_chain, np.arange(chains + 1))
    seen: dict[bytes, int] = {}
    return np.fromiter((seen.setdefault(colour[bounds[c]:bounds[c + 1]].tobytes(), len(seen))
                        for c in range(chains)), dtype=np.int64, count=chains)
