"""Graph builder for local SGD (periodic model averaging): H local iterations, then one exchange.

Every class runs `training.local_steps` = H iterations of forward, backward and its own optimizer
step with no communication; then the ranks average their models with the strategy's collectives
(all_reduce buckets, or push/pull through the parameter servers, which apply the average as
`server_delay_s`), bucket after bucket on the communication stream, through the codec (which then
compresses model deltas). No overlap: the model exists only after the last step. The executor's
iteration is one round; the reported iteration time is round / H.
"""
from __future__ import annotations

from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Compute, Graph, Stream
from simdist.strategies.data_parallel import bucket_exchange
from simdist.strategies.plan import ClassCompute, IterationPlan


def local_compute_s(plan: IterationPlan, local_steps: int) -> float:
    """Compute of one round: H iterations of the slowest class (k micro-batches and its own step each)."""
    return local_steps * max(plan.micro_steps * c.step_s + c.local_optimizer_s for c in plan.classes)


def round_graph(plan: IterationPlan, cc: ClassCompute, local_steps: int) -> Graph:
    b = GraphBuilder()
    last: tuple[int, ...] = ()
    for h in range(local_steps):
        last = (b.add(Compute, f"local step {h} forward+backward", last, Stream.COMPUTE,
                      duration_s=plan.micro_steps * cc.step_s, kind="forward+backward"),)
        if cc.local_optimizer_s:
            last = (b.add(Compute, f"local step {h} optimizer", last, Stream.COMPUTE,
                          duration_s=cc.local_optimizer_s, kind="optimizer"),)
    for j in range(len(plan.buckets)):
        bucket_exchange(b, plan, cc, j, last)
    return b.build(cc.rank_class)


def round_graphs(plan: IterationPlan, local_steps: int) -> list[Graph]:
    return [round_graph(plan, cc, local_steps) for cc in plan.classes]
