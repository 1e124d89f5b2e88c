"""The `simdist` command: thin verbs that load a scenario, call the engine and print or write results.

Every error a user can cause ends in one line on stderr and a documented exit code (2 bad scenario,
3 infeasible); `--debug` shows the traceback instead.
"""
from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path
from typing import Callable, Sequence

import click

import simdist.compare as breakeven_analysis
import simdist.engine.composite as composite
import simdist.engine.context_cache as engine_context_cache
import simdist.engine.simulation as simulation
import simdist.io.cli_options as cli_options
import simdist.io.compare_input as compare_input
import simdist.io.feasibility as feasibility
import simdist.io.load as scenario_load
import simdist.io.memory_hints as oom_fixes
import simdist.io.sweep_check as sweep_check
import simdist.io.sweep_load as sweep_load
import simdist.planner.plan as planner_plan
import simdist.planner.plan_report as plan_report
import simdist.planner.side_by_side as side_by_side
import simdist.planner.sweep as planner_sweep
import simdist.planner.table as sweep_table
import simdist.plots as plots
import simdist.report as text_report
import simdist.results.writers as writers
import simdist.scenario as scenario_types
import simdist.strategies.stragglers as stragglers
import simdist.validation.commands as validation_commands
import simdist.validation.published.runner as published_runner
from simdist import __version__
from simdist.errors import InfeasibleError, ScenarioError, SimdistError
from simdist.progress import Progress, Status, quiet
from simdist.tables import format_pairs
from simdist.units import parse_bandwidth


def _handle_errors(fn: Callable) -> Callable:
    """Turn SimdistErrors into one line per issue and an exit code; anything else into 'internal error'."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = kwargs.get("debug", False)
        try:
            return fn(*args, **kwargs)
        except SimdistError as exc:
            if debug:
                traceback.print_exc()
            issues = exc.issues if isinstance(exc, ScenarioError) else [str(exc)]
            for issue in issues:
                click.echo(f"error: {issue}", err=True)
            for hint in getattr(exc, "hints", ()):  # e.g. the fixes an out-of-memory refusal could take
                click.echo(hint, err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - last resort: never a bare traceback
            if debug:
                traceback.print_exc()
            else:
                click.echo(f"internal error: {type(exc).__name__}: {exc} (run with --debug for a traceback)", err=True)
            sys.exit(1)

    return wrapper


def _common(fn: Callable) -> Callable:
    fn = click.option("--debug", is_flag=True, help="Show tracebacks.")(fn)
    fn = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                      help="Override a scenario key, e.g. --set communication.strategy=ps")(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="simdist")
def main() -> None:
    """simdist: what-if simulation of distributed deep-learning training."""


def _load(path: str, overrides: Sequence[str]):
    return scenario_load.load_scenario(path, list(overrides))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_common
@_handle_errors
def check(files: tuple[str, ...], overrides: tuple[str, ...], debug: bool) -> None:
    """Check scenario files and print every problem at once: what `run` refuses (exit 2), else a model that does
    not fit in GPU memory (exit 3), each line as `run` words it, with the usual fixes; a sweep or plan file:
    what `sweep` / `plan` refuse before a point runs."""
    code = 0
    for f in files:
        planned = sweep_check.sweep_file_issues(f, list(overrides))  # a sweep: or plan: file: what sweep / plan refuse
        issues, infeasible = (planned, None) if planned is not None else feasibility.check_report(f, list(overrides))
        if issues:
            code = 2
            for issue in issues:
                text = str(issue)  # file-level problems (unreadable, not YAML) already name the file
                click.echo(text if text.startswith(f"{f}: ") else f"{f}: {text}", err=True)
        elif infeasible is not None:
            code = code or infeasible.exit_code
            click.echo(f"{f}: {infeasible}", err=True)
            for hint in oom_fixes.memory_hints(infeasible, f, list(overrides)):
                click.echo(hint, err=True)
        else:
            click.echo(f"{f}: ok")
    if code:
        sys.exit(code)


def _run_verb(file: str, overrides, as_json: bool, out: str | None, plot: str | None, fidelity: str) -> None:
    scenario = _load(file, overrides)

    verb = {"estimate": "estimating", "simulate": "simulating"}.get(fidelity or scenario.run.fidelity.value, "running")
    with quiet(as_json):  # --json: no progress bar, even on a terminal; a pipe gets none either
        with Status(f"{verb} {scenario.name} ({scenario.cluster.num_gpus:,} GPUs)"):
            try:
                result = simulation.simulate(scenario, fidelity=fidelity)
            except InfeasibleError as err:  # out of memory: the usual fixes, tried on this scenario
                err.hints = oom_fixes.memory_hints(err, file, list(overrides), scenario)
                raise
            # builds the topology again: inside
            report = None if as_json else text_report.print_result(scenario, result)
    if out:
        writers.write_result_dir(result, out)
    if as_json:
        click.echo(writers.result_json(result), nl=False)
    else:
        click.echo(report)
        if out:
            click.echo(f"\nwrote {out}/")
    if plot:
        if result.goodput:  # a failure run: throughput over time with the failures marked
            plots.plot_goodput_timeline(scenario, result, plot)
        else:
            plots.plot_result(scenario, result, plot)
        if not as_json:
            click.echo(f"plot: {plot}")


def _result_command(fn: Callable) -> Callable:
    """The shared shape of `run` and `estimate`: FILE, --set/--debug, --json, --out, --plot."""
    fn = _handle_errors(fn)
    fn = click.option("--plot", type=click.Path(dir_okay=False),
                      help="Write a plot of the result (PNG; a failure run: throughput over time, failures marked).")(fn)
    fn = click.option("--out", type=click.Path(file_okay=False),
                      help="Write result.json, iterations.csv and trace.json here.")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print the result object (every key in docs/results.md).")(fn)
    fn = _common(fn)
    return click.argument("file", type=click.Path(dir_okay=False))(fn)


@main.command()
@_result_command
def run(file: str, overrides, debug: bool, as_json: bool, out: str | None, plot: str | None) -> None:
    """Simulate a scenario (discrete events, unless run.fidelity says estimate)."""
    _run_verb(file, overrides, as_json, out, plot, fidelity="")


@main.command()
@_result_command
def estimate(file: str, overrides, debug: bool, as_json: bool, out: str | None, plot: str | None) -> None:
    """The same result from the analytical model, with no events (fast, for planning)."""
    _run_verb(file, overrides, as_json, out, plot, fidelity="estimate")


@main.command()
@click.argument("kind", type=click.Choice(["gpus", "links", "topologies", "intra_node", "models"]))
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_handle_errors
def catalog(kind: str, as_json: bool, debug: bool) -> None:
    """List the catalog: gpus, links, topologies, intra_node or models."""
    if as_json:
        headers, rows = text_report.catalog_rows(kind)
        click.echo(json.dumps([dict(zip(headers, r)) for r in rows], indent=2))
    else:
        click.echo(text_report.catalog_text(kind))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_common
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Where to draw the graph (PNG).")
@click.option("--heatmap", type=click.Path(dir_okay=False), default=None,
              help="Simulate the scenario and draw the topology with every link coloured by its utilisation "
                   "(PNG or SVG).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@_handle_errors
def topo(file: str, overrides, debug: bool, out: str | None, heatmap: str | None, as_json: bool) -> None:
    """Summarise a scenario's cluster and draw its topology (--heatmap: with link utilisation from a simulation)."""
    if heatmap:
        plots.check_plot_path(heatmap)
    scenario = _load(file, overrides)
    summary, topology = text_report.cluster_summary(scenario)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(format_pairs(list(summary.items()), title=f"cluster of {scenario.name}"))
    if out:
        plots.draw_topology(topology, out)
        if not as_json:
            click.echo(f"drew {out}")
    if heatmap:  # utilisation needs discrete events: the closed forms report no per-link load

        loads, what = _link_loads(scenario)
        plots.link_heatmap(topology, loads, heatmap)
        if not as_json:
            click.echo(f"heatmap of {what} (simulated): {heatmap}")


def _link_loads(scenario):
    """({"u->v": utilisation} of every directed link, what it covers) from one simulated run: a training
    workload's whole network (links that carried nothing at 0); a benchmark (sizes run one by one) or a phased
    run gives its result's busiest links (LinkUtilization rows). A failure run's is its healthy cluster's."""
    # runs of several parts: their top links
    if scenario.workload.benchmark is not None or composite.is_phased(scenario):
        links = simulation.simulate(scenario, fidelity="simulate").links
        return links, f"the {len(links)} busiest links"
    healthy = composite.healthy_scenario(scenario) if stragglers.needs_timeline(scenario) else scenario
    ctx = engine_context_cache.run_context(healthy, scenario_types.Fidelity.SIMULATE)
    composite.run_training(healthy, scenario_types.Fidelity.SIMULATE, with_baseline=False, context=ctx)
    loads = ctx.network.link_utilization(ctx.env.now)
    return loads, f"every link ({sum(1 for u in loads.values() if u > 0)} carried traffic)"


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_common
@click.option("--bandwidths", default="1 Gb/s,10 Gb/s,25 Gb/s,100 Gb/s,200 Gb/s,400 Gb/s", show_default=True,
              help="Comma-separated NIC bandwidths to try (one FILE: break-even mode).")
@click.option("--methods", default="fp16,int8,topk:0.01,powersgd:4", show_default=True,
              help="Codecs: method[:ratio|rank], comma-separated (one FILE: break-even mode).")
@click.option("--fidelity", type=click.Choice(["estimate", "simulate"]), default="estimate", show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write the break-even plot (PNG).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@_handle_errors
def compare(files, overrides, debug, bandwidths, methods, fidelity, plot, as_json) -> None:
    """Several FILES: their results side by side and every breakdown term's difference from the first.
    One FILE: at which NIC bandwidth each compression codec pays off (break-even analysis)."""
    if len(files) > 1:
        cli_options.check_side_by_side_plot(plot)
        results = [(Path(f).stem, simulation.simulate(_load(f, overrides), fidelity=fidelity)) for f in files]
        table = side_by_side.comparison(results)
        click.echo(json.dumps(table, indent=2) if as_json else side_by_side.format_comparison(table))
        return

    scenario = _load(files[0], overrides)
    bws = [parse_bandwidth(b.strip(), f"--bandwidths[{i}]") for i, b in enumerate(bandwidths.split(",")) if b.strip()]
    specs = compare_input.parse_methods(methods)
    compare_input.check_breakeven(scenario, bws, specs)
    table = breakeven_analysis.breakeven(scenario, bws, specs, fidelity=fidelity)
    click.echo(json.dumps(table.to_dict(), indent=2) if as_json else breakeven_analysis.format_breakeven(table))
    if plot:
        plots.plot_breakeven(table, plot)
        if not as_json:
            click.echo(f"plot: {plot}")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_common
@click.option("--axis", "axes", multiple=True, metavar="KEY=V1,V2,...",
              help="A swept key: values, range(start, stop, step) or geom(start, stop, n). Repeatable.")
@click.option("--zip", "zipped", multiple=True, metavar="KEY1,KEY2", help="Axes that advance together.")
@click.option("--constraint", "constraints", multiple=True, metavar="EXPR",
              help="Keep points where EXPR holds, e.g. 'gpus <= 1024 and cost_per_hour < 2000'.")
@click.option("--out", default="sweep.csv", show_default=True, type=click.Path(dir_okay=False),
              help="The result table; a rerun into the same file resumes.")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True)
@click.option("--fidelity", type=click.Choice(["estimate", "simulate"]), default=None,
              help="Default: each point's run.fidelity.")
@click.option("--jobs", type=int, default=0, help="Worker processes (default: the number of cores).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--address", default=None, help="Ray cluster to join (with --executor ray).")
@click.option("--json", "as_json", is_flag=True, help="Print the table and counts as JSON.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="PNG or SVG: scaling curves when an axis changes the GPU count, goodput against "
                   "failures.recovery.checkpoint_interval (Young/Daly marked), else breakdown bars.")
@_handle_errors
def sweep(file, overrides, debug, axes, zipped, constraints, out, fmt, fidelity, jobs, executor, address,
          as_json, plot) -> None:
    """Run a scenario over swept keys: one row per point, resumable, in parallel."""
    if plot:
        plots.check_plot_path(plot)

    cli_options.check_executor_options(jobs, executor, address)
    base, block, base_dir, name = sweep_load.read_sweep_file(file)
    spec = sweep_load.sweep_spec(block, axes, zipped, constraints)
    sweep_load.check_out_file(out, fmt, spec, base, overrides, fidelity or "")
    bar: list[Progress] = []

    def progress(total: int, n: int) -> None:
        if not bar:
            bar.append(Progress(total, enabled=None if not as_json else False))
        if n:
            bar[0].advance(n)

    outcome = planner_sweep.run_sweep(spec, base, sweep_load.load_point, out, base_dir=str(base_dir), name=name,
                                      overrides=overrides, fidelity=fidelity or "", jobs=jobs, executor=executor,
                                      address=address, fmt=fmt, progress=progress)
    if bar:
        bar[0].close()
    if plot:
        _sweep_plot(outcome.rows, [a.key for a in spec.axes], plot, name,
                    lambda: sweep_load.load_point(base, overrides, {}, str(base_dir), name))
    if as_json:
        click.echo(json.dumps({"file": out, "points": outcome.points, "ran": outcome.ran,
                               "resumed": outcome.resumed, "pruned": outcome.pruned,
                               "by_status": outcome.by_status, "columns": list(outcome.columns),
                               "rows": outcome.rows}, indent=2))
        return
    click.echo(sweep_table.format_sweep(outcome.rows, [a.key for a in spec.axes], out))
    counts = ", ".join(f"{v} {k}" for k, v in sorted(outcome.by_status.items()))
    click.echo(f"\n{outcome.points} points: ran {outcome.ran}, already done {outcome.resumed}, "
               f"excluded by constraints {outcome.pruned} ({counts}); wrote {out}")


def _sweep_plot(rows, keys, path: str, name: str, base_scenario=None) -> None:
    """Scaling curves when an axis changes the GPU count; goodput against the checkpoint interval (Young/Daly
    marked) when that is the axis; else one stacked breakdown bar per point."""
    interval = "failures.recovery.checkpoint_interval"
    if interval in keys and any(r.get("goodput_ratio") not in (None, "") for r in rows):
        optimum = composite.failure_model(base_scenario()).young_daly_interval_s if base_scenario else None
        plots.plot_goodput_sweep(rows, interval, path, optimum,
                                 title=f"{name}: goodput against the checkpoint interval")
    elif any(plots.is_gpu_count_axis(k) for k in keys):
        plots.plot_scaling(rows, keys, path, title=f"{name}: scaling against GPU count")
    else:
        items = {", ".join(str(r.get(k)) for k in keys) or str(r.get("point")): r for r in rows}
        plots.plot_breakdown_bars(items, path, title=f"{name}: where each iteration's time goes")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_common
@click.option("--axis", "axes", multiple=True, metavar="KEY=V1,V2,...", help="A key the plan may choose. Repeatable.")
@click.option("--zip", "zipped", multiple=True, metavar="KEY1,KEY2",
              help="Axes that advance together (equal lengths), e.g. a GPU and its node interior. Repeatable.")
@click.option("--objective", type=click.Choice(["throughput", "cost", "time_to_train", "goodput"]), default=None,
              help="What to optimise (default throughput, or the plan block's).")
@click.option("--constraint", "constraints", multiple=True, metavar="EXPR", help="e.g. 'gpus <= 1024'.")
@click.option("--budget-per-hour", type=float, default=None, help="Most USD per hour for the cluster.")
@click.option("--max-gpus", type=int, default=None)
@click.option("--deadline", default=None, help="Longest time to train, e.g. '14 d' (needs --samples or --tokens).")
@click.option("--samples", type=float, default=None, help="Samples to train (for time_to_train and --deadline).")
@click.option("--tokens", type=float, default=None, help="Tokens to train (for time_to_train and --deadline).")
@click.option("--top", type=int, default=None, help="Candidates to list (default 10).")
@click.option("--confirm", type=int, default=None, help="Best candidates to confirm by simulation (default 10).")
@click.option("--max-points", type=int, default=None,
              help="auto search: exhaustive up to this many points, halving beyond; the most a halving or sample "
                   "search estimates (default 20000).")
@click.option("--search", "search_method", type=click.Choice(["auto", "exhaustive", "halving", "sample"]), default=None,
              help="How to search (default auto: exhaustive up to --max-points, successive halving beyond; sample: "
                   "a seeded random sample of --max-points and a local search).")
@click.option("--eta", type=int, default=None, help="Successive halving keeps the best 1/eta at each rung (default 3).")
@click.option("--rungs", default=None, metavar="R1,R2,...",
              help="Successive halving's fidelity ladder, from bound, estimate, simulate:N, simulate "
                   "(default bound,estimate,simulate).")
@click.option("--seed", type=int, default=None,
              help="Seed of the halving's tie-breaks and of the sample (default 0): the same seed, the same plan.")
@click.option("--prune/--no-prune", default=None,
              help="Skip compute classes whose exact compute bound cannot reach the top candidates or the Pareto "
                   "front (default on; --no-prune estimates every candidate the search picks).")
@click.option("--jobs", type=int, default=0, help="Worker processes (default: the number of cores).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (every candidate with its status).")
@click.option("--out", default=None, type=click.Path(dir_okay=False),
              help="Write every candidate with its status, reason and figures (CSV, or Parquet with --format).")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True)
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="PNG or SVG: the Pareto front of throughput against price, the chosen plan marked.")
@_handle_errors
def plan(file, overrides, debug, axes, zipped, objective, constraints, budget_per_hour, max_gpus, deadline, samples,
         tokens, top, confirm, max_points, search_method, eta, rungs, seed, prune, jobs, as_json, out, fmt,
         plot) -> None:
    """Search the allowed configurations for the best plan: estimate all, simulate the best, Pareto front."""
    if plot:
        plots.check_plot_path(plot)

    base, block, base_dir, name = sweep_load.read_sweep_file(file, "plan")
    spec = sweep_load.plan_spec(block, axes, {"objective": objective, "constraints": constraints,
                                   "budget_per_hour": budget_per_hour, "max_gpus": max_gpus, "deadline": deadline,
                                   "samples": samples, "tokens": tokens, "top": top, "confirm": confirm,
                                   "max_points": max_points, "search": search_method, "eta": eta, "rungs": rungs,
                                   "seed": seed, "prune": prune}, zipped)
    sweep_load.check_goodput(spec, base, overrides, str(base_dir), name)
    with quiet(as_json):  # --json: no progress bar, even on a terminal
        result = planner_plan.search(spec, base, sweep_load.load_point, base_dir=str(base_dir), name=name,
                                     overrides=overrides, jobs=jobs)
    if out:
        plan_report.write_candidates(result, spec, out, fmt)
    if plot:
        tokens_ = spec.tokens or any(r.get("tokens_per_s") for r in result.ranked + result.front)
        useful = "useful " if spec.objective == planner_plan.Objective.GOODPUT else ""
        unit = useful + ("tokens/s" if tokens_ else "samples/s")
        group, label = plan_report.pareto_labels(spec)
        ranked = [c for c in result.candidates if c["status"] == "ranked"]  # every feasible candidate
        plots.plot_pareto(ranked, result.front, result.ranked[0] if result.ranked else None, plot,
                          unit=unit, rate=lambda r: planner_plan.useful_rate(r, spec), group=group, label=label,
                          title=f"{name}: throughput against price (objective {spec.objective.value})")
    click.echo(json.dumps(plan_report.plan_json(result, spec), indent=2, default=str) if as_json
               else plan_report.format_plan(result, spec))
    if out and not as_json:
        click.echo(f"\nwrote {out} ({len(result.candidates)} candidates with their status)")


@main.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--published", is_flag=True,
              help="Predict the published-benchmark suite (validation/published/cases.yaml) uncalibrated "
                   "and compare with the measured figures; FILES are not run.")
@click.option("--category", "categories", multiple=True, metavar="NAME",
              help="With --published: only the cases of this category (repeatable), e.g. busbw or llm_dense.")
@click.option("--launcher", type=click.Choice(["emulab", "torchrun", "local"]), default="emulab", show_default=True,
              help="emulab: Linux namespaces with shaped links (root); local: loopback; torchrun: a real cluster.")
@click.option("--calibration", type=click.Path(dir_okay=False), default=None, help="A profile from `simdist calibrate`.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Keep raw measurements and a plot here.")
@click.option("--rate-scale", type=float, default=1.0, show_default=True, help="Scale link rates for the testbed.")
@click.option("--json", "as_json", is_flag=True, help="Print the validation object (docs/results.md, section simdist validate --json).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_handle_errors
def validate(files, published, categories, launcher, calibration, out, rate_scale, as_json, debug) -> None:
    """Run scenarios for real on torch.distributed and compare with the simulator's predictions."""
    if categories and not published:
        raise click.UsageError("--category selects cases of the published suite: give it with --published")
    if published:
        if files:
            raise click.UsageError("--published runs the published suite; give no FILES with it")
        if calibration or out or rate_scale != 1.0:
            raise click.UsageError("--published predicts uncalibrated and runs nothing: --calibration, --out "
                                   "and --rate-scale do not apply to it")


        with quiet(as_json):
            try:
                report = published_runner.run_suite(categories=categories or None)
            except ValueError as err:  # an unknown category
                raise click.UsageError(str(err)) from None
        click.echo(json.dumps(report, indent=2) if as_json else published_runner.format_report(report))
        if report["failed"]:  # a case that could not be predicted is a failed validation run (exit 1)
            click.echo(f"error: {len(report['failed'])} published case(s) failed to run: "
                       f"{', '.join(report['failed'])}", err=True)
            sys.exit(1)
        return
    if not files:
        raise click.UsageError("give scenario FILES to run, or --published")


    with quiet(as_json):  # a terminal shows layouts measured; --json and pipes show nothing
        report = validation_commands.validate(list(files), launcher=launcher, calibration=calibration, out=out,
                                              rate_scale=rate_scale)
    click.echo(json.dumps(report, indent=2) if as_json else validation_commands.format_validation(report))


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Where to write the profile (JSON).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_handle_errors
def calibrate(run_dir, out, debug) -> None:
    """Fit link latency/efficiency and compute efficiency from harness measurements into a profile."""
    click.echo(validation_commands.calibrate_command(run_dir, out))


if __name__ == "__main__":  # pragma: no cover
    main()
