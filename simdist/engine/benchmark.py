"""nccl-tests-style predictions: time, algbw and busbw of one collective over a sweep of sizes."""
from __future__ import annotations

from simdist.collectives.cost import bus_factor
from simdist.engine.context_cache import run_context
from simdist.engine.outcomes import top_links
from simdist.engine.state import result_header
from simdist.topology.summary import link_assumptions
from simdist.results.records import BenchmarkSummary, CollectiveRow, RunResult
from simdist.scenario import Fidelity, Scenario


def run_benchmark(scenario: Scenario, fidelity: Fidelity) -> RunResult:
    """Each size runs alone on an idle fabric, as nccl-tests measures it (one op at a time)."""
    bench = scenario.workload.benchmark
    assert bench is not None
    ctx = run_context(scenario, fidelity)
    n = ctx.group.size
    rows = []
    for size in bench.sizes_bytes:
        schedule = ctx.schedule(bench.op, size)
        t = ctx.network.schedule_time(schedule)
        algbw = size / t if t > 0 else 0.0
        rows.append(CollectiveRow(op=bench.op.value, size_bytes=size, time_s=t, algbw_GBps=algbw / 1e9,
                                  busbw_GBps=algbw * bus_factor(bench.op, n) / 1e9, algorithm=schedule.algorithm))
    links = ()
    if rows:  # which links the largest size loads most (the one that sets busbw)
        # schedule_time ran each size in a private environment; play the largest on the shared one
        ctx.env.process(ctx.network.run(ctx.env, ctx.schedule(bench.op, rows[-1].size_bytes)))
        ctx.env.run()
        links = top_links(ctx)
    return RunResult(**result_header(scenario, fidelity), collectives=tuple(rows), links=links,
                     extra={"links_used": link_assumptions(scenario.cluster)},
                     benchmark=BenchmarkSummary(op=bench.op.value, ranks=n,
                                                strategy=scenario.communication.strategy.value,
                                                backend=scenario.communication.backend.value))
