"""What usually makes a model fit in GPU memory, tried on one scenario without simulating anything.

The usual fixes of an out-of-memory training run (Megatron-LM's and DeepSpeed's guides, PyTorch FSDP's):
shard the model states (a higher ZeRO stage), split every layer over more GPUs (tensor parallelism),
split the layers over more GPUs (pipeline parallelism), recompute activations in the backward pass,
or run a smaller micro-batch (more gradient accumulation steps keep the samples per update). Each is
tried alone, in growing steps (ZeRO 1, 2, 3; tp and pp x2, x4, x8; selective then full recomputation;
half the micro-batch, then a quarter, ... down to 1), through the memory check the run itself makes
(the caller passes it: io.feasibility.memory_infeasibility), and the first step that fits is reported.
A change the scenario refuses (tp over a node's GPUs, pp over more stages than layers, recomputation of a
model without transformer blocks) is reported as not possible, with the refusal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

Changes = dict[str, Any]


@dataclass(frozen=True)
class MemoryFix:
    """One usual fix: what it changes, whether it makes the scenario fit, and the memory check's words."""

    fix: str  # e.g. 'a higher ZeRO stage'
    changes: Changes  # the scenario keys and values of the step reported (the first that fits, else the last)
    fits: bool | None  # None: the scenario refuses every step of this fix
    detail: str  # the refusal, or what the step still needs ('' when it fits)

    def text(self, scenario: Any) -> str:
        """'a higher ZeRO stage: training.parallelism.zero 0 -> 2 fits'."""
        change = ", ".join(f"{k} {_current(scenario, k)} -> {v}" for k, v in self.changes.items())
        if self.fits:
            return f"{self.fix}: {change} fits"
        if self.fits is None:
            return f"{self.fix}: not possible here ({self.detail})"
        return f"{self.fix}: even {change} does not fit ({self.detail})"


def _current(scenario: Any, key: str) -> Any:
    value = scenario
    for part in key.split("."):
        value = getattr(value, part, None)
    return getattr(value, "value", value)


def _steps(scenario: Any) -> Iterator[tuple[str, list[Changes]]]:
    """The usual fixes, each as its steps from the mildest to the strongest."""
    t, w = scenario.training, scenario.workload
    par = t.parallelism
    yield "a higher ZeRO stage", [{"training.parallelism.zero": z} for z in range(par.zero + 1, 4)]

    def split(key: str, degree: int) -> list[Changes]:
        out = []
        for f in (2, 4, 8):
            step: Changes = {key: degree * f}
            if par.dp is not None:  # dp was given: it gives up the GPUs the split takes
                if par.dp % f:
                    break
                step["training.parallelism.dp"] = par.dp // f
            out.append(step)
        return out

    yield "more tensor parallelism", split("training.parallelism.tp", par.tp)
    yield "more pipeline stages", split("training.parallelism.pp", par.pp)
    stronger = {"none": ["selective", "full"], "selective": ["full"], "selective_op": ["full"]}
    modules = {"training.recompute_modules": None} if t.recompute_modules else {}  # selective's alone: full drops them
    yield "activation recomputation", [{"training.recompute": r, **modules}
                                       for r in stronger.get(getattr(t.recompute, "value", t.recompute), [])]
    if par.tp > 1 or par.pp > 1:  # a pipeline's micro-batch
        yield "a smaller micro-batch", [{"training.micro_batch": m} for m in _halves(t.micro_batch)]
    elif w.global_batch is not None:  # the global batch stays: more accumulation steps make each one smaller
        yield "a smaller micro-batch", [{"training.grad_accumulation": t.grad_accumulation * f}
                                        for f in (2, 4, 8)]
    elif w.batch_per_gpu:
        yield "a smaller micro-batch", [{"workload.batch_per_gpu": b,
                                         "training.grad_accumulation": t.grad_accumulation * (w.batch_per_gpu // b)}
                                        for b in _halves(w.batch_per_gpu) if w.batch_per_gpu % b == 0]


def _halves(n: int) -> list[int]:
    out = []
    while n > 1:
        n //= 2
        out.append(n)
    return out


def memory_fixes(scenario: Any, load: Callable[[Changes], Any],
                 infeasibility: Callable[[Any], Exception | None]) -> list[MemoryFix]:
    """Each usual fix tried alone on `scenario`: `load(changes)` gives the scenario with those keys changed
    (raising the loader's refusal), `infeasibility(s)` the memory check's error or None when s fits."""
    out = []
    for fix, steps in _steps(scenario):
        result: MemoryFix | None = None
        refusals: list[str] = []
        for changes in steps:
            try:
                changed = load(changes)
            except Exception as err:  # noqa: BLE001 - the loader's refusal: this step is not possible here
                refusals.append(f"{', '.join(f'{k} {v}' for k, v in changes.items())} is refused: {_first_line(err)}")
                continue
            err = infeasibility(changed)
            result = MemoryFix(fix, changes, err is None, "" if err is None else _needs(str(err)))
            if err is None:
                break
        if result is None:
            result = MemoryFix(fix, steps[-1] if steps else {}, None,
                               refusals[0].split(" is refused: ", 1)[1] if refusals
                               else "the scenario has it at its limit already")
        elif not result.fits and refusals:  # a stronger step exists but the scenario refuses it: say why
            result = MemoryFix(fix, result.changes, False, f"{result.detail}; {refusals[-1]}")
        out.append(result)
    return out


def _first_line(err: Exception) -> str:
    issues = getattr(err, "issues", None)
    return str(issues[0]) if issues else str(err)


def _needs(message: str) -> str:
    """'does not fit in GPU memory: needs 90 GiB per GPU (...), the a100 has 80 GiB' -> 'needs 90 GiB per GPU'."""
    tail = message.split(": ", 1)[-1]
    return tail.split(" (", 1)[0] if tail.startswith("needs") else tail
