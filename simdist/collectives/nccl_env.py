"""NCCL_ALGO and NCCL_PROTO as NCCL reads them (communication.nccl_algo / nccl_proto).

NCCL parses both with one function (NVIDIA/nccl src/graph/tuning.cc: parseList): a comma-separated list of
names, case-insensitive, that enables exactly those; a leading '^' disables them and enables the rest; and,
after the first entry, ';'-separated entries prefixed by a function ('allreduce:tree'), which replace the list
for that function only. The names are ncclAlgoStr / ncclProtoStr (src/init.cc): Tree, Ring, CollNetDirect,
CollNetChain, NVLS, NVLSTree, PAT and LL, LL128, Simple. An algorithm or protocol disabled here is never
chosen by the tuner, whatever it predicts; a protocol named explicitly is enabled even where NCCL leaves it off
by default (LL128 off NVLink, Simple-only net plugins). Point-to-point operations (all-to-all) do not go
through the tuner and are not affected.
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.collectives.schedule import CollectiveOp

Op = CollectiveOp
# ncclAlgoStr -> simdist's algorithm names (PAT has no schedule in simdist: enabling it adds nothing)
ALGORITHMS: dict[str, str | None] = {
    "tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
    "nvls": "nvls", "nvlstree": "nvls_tree", "pat": None,
}
PROTOCOLS: dict[str, str] = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
# ncclFuncStr -> simdist's ops
FUNCTIONS: dict[str, CollectiveOp] = {
    "broadcast": Op.BROADCAST, "reduce": Op.REDUCE, "allgather": Op.ALL_GATHER,
    "reducescatter": Op.REDUCE_SCATTER, "allreduce": Op.ALL_REDUCE,
}
TUNED_OPS = tuple(FUNCTIONS.values())


def _parse(text: str, names: dict, what: str) -> dict[CollectiveOp, frozenset[str]]:
    """Enabled element names (the dict's keys) per function, as parseList leaves its table; ValueError on
    anything NCCL would refuse (ncclInvalidUsage)."""
    enabled: dict[CollectiveOp, frozenset[str]] = {op: frozenset(names) for op in TUNED_OPS}
    entries = text.split(";")
    for i, entry in enumerate(entries):
        prefix, _, elems = entry.partition(":")
        if not _:
            if i:
                raise ValueError(f"all entries except the first must have a function prefix: {text!r}")
            prefix, elems = "", entry
        prefix = prefix.strip().lower()
        if prefix and prefix not in FUNCTIONS:
            raise ValueError(f"unknown function {prefix!r} in {text!r}; expected one of "
                             f"{sorted(FUNCTIONS)}")
        elems = elems.strip()
        exclude = elems.startswith("^")
        tokens = [t.strip().lower() for t in elems.lstrip("^").split(",")]
        for t in tokens:
            if t not in names:
                raise ValueError(f"unknown {what} {t!r} in {text!r}; expected one of {sorted(names)} "
                                 "(case-insensitive)")
        listed = frozenset(tokens)
        value = frozenset(names) - listed if exclude else listed
        for op in ([FUNCTIONS[prefix]] if prefix else TUNED_OPS):
            enabled[op] = value
    return enabled


@dataclass(frozen=True)
class NcclEnable:
    """Which (algorithm, protocol) pairs NCCL_ALGO / NCCL_PROTO leave the tuner, per collective; None: unset."""

    algo: str | None = None
    proto: str | None = None

    def __post_init__(self) -> None:
        self.algorithms(Op.ALL_REDUCE)  # ValueError now for a list NCCL would refuse
        self.protocols(Op.ALL_REDUCE)

    def algorithms(self, op: str) -> frozenset[str] | None:
        """simdist algorithm names enabled for `op`, or None where NCCL_ALGO leaves every one."""
        op = CollectiveOp(op)
        if self.algo is None or op not in TUNED_OPS:
            return None
        return frozenset(a for n in _parse(self.algo, ALGORITHMS, "algorithm")[op] if (a := ALGORITHMS[n]))

    def protocols(self, op: str) -> frozenset[str] | None:
        """Protocols (Protocol values) enabled for `op`, or None where NCCL_PROTO leaves the defaults."""
        op = CollectiveOp(op)
        if self.proto is None or op not in TUNED_OPS:
            return None
        return frozenset(PROTOCOLS[n] for n in _parse(self.proto, PROTOCOLS, "protocol")[op])

    def allows(self, op: str, algorithm: str, protocol: str) -> bool:
        """Whether the tuner may run `algorithm` with `protocol` for `op`."""
        algos, protos = self.algorithms(op), self.protocols(op)
        return (algos is None or algorithm in algos) and (protos is None or protocol in protos)


def check_list(text: str, kind: str) -> str | None:
    """Why NCCL would refuse `text` as NCCL_ALGO (kind 'algo') or NCCL_PROTO ('proto'), or None."""
    try:
        NcclEnable(**{kind: text})
    except ValueError as err:
        return str(err)
    return None


def enable_of(algo: str | None, proto: str | None) -> NcclEnable | None:
    """The restriction communication.nccl_algo / nccl_proto set, or None where neither is set."""
    return None if algo is None and proto is None else NcclEnable(algo, proto)
