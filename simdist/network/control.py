"""Link control shared by both network models: capacities that change mid-run, failed and restored
cables, and the router that avoids dead ones.

A directed link with capacity <= 0 is *dead*; routing then avoids its whole cable (both directions,
as a failed cable or port does), so ECMP is recomputed over the remaining paths: steps started from
then on take them, and (flow model) groups in flight on the dead link move onto them at that instant.
Where no path remains, the model raises InfeasibleError naming the link and the simulated time.
Links are named as in results ("leaf0->spine1") or given by directed link id.
"""
from __future__ import annotations

import numpy as np

from simdist.errors import InfeasibleError
from simdist.network.paths import PathTable
from simdist.network.steps import StepCache
from simdist.topology.graph import Topology
from simdist.topology.routing import Router


class LinkControl:
    """Mixin: `topology`, `paths` (PathTable) and `steps` (StepCache) set by the model; the model
    implements `_write_capacity` (apply one directed link's new capacity now), `_now_s` and `_routes_changed`."""

    topology: Topology
    paths: PathTable
    steps: StepCache

    def _init_control(self) -> None:
        self._router = self.paths.router  # the router as configured, before dead links are taken out
        self._built_router = self._router
        self._down: frozenset[tuple[str, str]] = frozenset()
        self._down_since: dict[tuple[str, str], float] = {}

    @property
    def pristine(self) -> bool:
        """Whether no link has been failed, degraded or rerouted: the topology's own capacities and the router
        the model was built with (a model built afresh for the same cluster is the same)."""
        return self._router is self._built_router and np.array_equal(self.capacity_Bps,
                                                                        self.topology.links.capacity_Bps)

    # -- what a model provides -------------------------------------------------------------------
    def _write_capacity(self, link_id: int, capacity_Bps: float) -> None:
        raise NotImplementedError

    def _now_s(self) -> float:
        raise NotImplementedError

    def _routes_changed(self) -> None:
        """Routes of later steps differ now (memoised answers are stale)."""
        raise NotImplementedError

    @property
    def capacity_Bps(self) -> np.ndarray:
        raise NotImplementedError

    # -- public ----------------------------------------------------------------------------------
    def link_id(self, link: "int | str") -> int:
        """The directed link id of `link` (an id, or a name 'u->v' as results print it)."""
        if isinstance(link, (int, np.integer)):
            if not 0 <= int(link) < len(self.topology.links.ends):
                raise KeyError(f"no directed link {link}")
            return int(link)
        u, sep, v = str(link).partition("->")
        i = self.topology.links.index.get((u, v)) if sep else None
        if i is None:
            raise KeyError(f"no directed link {link!r} (expected a name like 'leaf0->spine1')")
        return i

    def set_link_capacity(self, link: "int | str", capacity_Bps: float) -> None:
        """Change one directed link's capacity now (degradation; 0 kills its cable for routing).
        Flow groups in flight re-share at this instant; ones on a dead link are rerouted."""
        if not capacity_Bps >= 0:
            raise ValueError(f"capacity must be >= 0 B/s, got {capacity_Bps!r}")
        i = self.link_id(link)
        self._write_capacity(i, float(capacity_Bps))
        self._update_down()

    def fail_link(self, link: "int | str") -> None:
        """The cable of `link` fails: both directions drop to 0 now."""
        u, v = self.topology.links.ends[self.link_id(link)]
        for i in (self.topology.links.index[(u, v)], self.topology.links.index[(v, u)]):
            self._write_capacity(i, 0.0)
        self._update_down()

    def restore_link(self, link: "int | str") -> None:
        """The cable of `link` comes back at the topology's capacity, both directions."""
        u, v = self.topology.links.ends[self.link_id(link)]
        for i in (self.topology.links.index[(u, v)], self.topology.links.index[(v, u)]):
            self._write_capacity(i, float(self.topology.links.capacity_Bps[i]))
        self._update_down()

    def schedule_link_capacity(self, env, at_s: float, link: "int | str", capacity_Bps: float):
        """A simpy process that sets `link` to `capacity_Bps` at simulated time `at_s` (absolute)."""
        def change(env):
            yield env.timeout(max(0.0, at_s - env.now))
            self.set_link_capacity(link, capacity_Bps)
        return env.process(change(env))

    def dead_links(self) -> list[str]:
        """Names of the directed links with no capacity now (sorted)."""
        return sorted(self.topology.links.name(int(i)) for i in np.flatnonzero(self.capacity_Bps <= 0))

    def set_router(self, router: Router) -> None:
        """Route steps that start from now on with `router` (dead links are still taken out of it)."""
        self._router = router
        self._down = frozenset()
        self._update_down(force=True)

    # -- internals -------------------------------------------------------------------------------
    def _update_down(self, force: bool = False) -> None:
        ends = self.topology.links.ends
        dead = np.flatnonzero(self.capacity_Bps <= 0)
        down = frozenset(tuple(sorted(ends[int(i)])) for i in dead)
        if down == self._down and not force:
            self._routes_changed()  # only a capacity moved: memoised times are stale, routes are not
            return
        now = self._now_s()
        self._down_since = {c: self._down_since.get(c, now) for c in down}
        self._down = down
        router = self._router
        if down and hasattr(router, "without"):
            router = router.without(down)
        # new tables, never cleared in place: the default ones are shared with other models
        self.steps = StepCache(PathTable(self.topology, router), self.steps.max_entries)
        self.paths = self.steps.paths
        self._routes_changed()

    def _infeasible(self, detail: str, links: "np.ndarray | None" = None) -> InfeasibleError:
        """InfeasibleError naming the dead links (those among `links` when given) and the simulated time."""
        dead = np.flatnonzero(self.capacity_Bps <= 0)
        if links is not None:
            dead = np.intersect1d(dead, links)
        ends = self.topology.links.ends
        names = ", ".join(f"{self.topology.links.name(int(i))} (no capacity since t="
                          f"{self._down_since.get(tuple(sorted(ends[int(i)])), self._now_s()):.9g} s)" for i in dead)
        return InfeasibleError(f"{detail} at simulated time t={self._now_s():.9g} s: link {names or '(none dead)'}"
                               " and no other path")
