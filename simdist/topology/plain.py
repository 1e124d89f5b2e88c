"""LinkGraph: the undirected graph the built-in fabric builders produce, without importing networkx.

`import networkx` loads ~285 modules (~0.15 s), more than building and routing a 512-GPU cluster
takes, and the built-in fabrics only need a dict of dicts. LinkGraph stores exactly what networkx's
`Graph` stores (`graph` attributes, `_node` {vertex: attrs}, `_adj` {vertex: {neighbour: edge attrs}},
one attribute dict shared by both directions of an edge) and mutates it the same way, so vertices,
neighbours and edges come out in the same insertion order, and the subset of `nx.Graph`'s API that
simdist and its tests use (`nodes`, `edges`, `adj`, `g[u]`, `has_edge`, `degree`, `neighbors`,
`subgraph`, `add_*`, `remove_edges_from`, ...) reads the same. Code that needs networkx's algorithms
(custom GraphML fabrics, max-flow bisection, failure bridges) imports networkx itself, or converts with
`to_networkx()` (the same vertices, attributes and adjacency order). A `Topology` built by hand from an
`nx.Graph` works unchanged: everything in simdist reads either through this common subset.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator


def _nbunch(graph: "LinkGraph", nbunch: Any) -> Iterable:
    """networkx's nbunch_iter: every vertex (None), one vertex, or the vertices of an iterable in it."""
    if nbunch is None:
        return graph._adj
    try:
        if nbunch in graph._adj:
            return (nbunch,)
    except TypeError:  # unhashable: an iterable of vertices
        pass
    return [v for v in nbunch if v in graph._adj]


class NodeView:
    """`g.nodes`: iterate, `len`, `in`, `g.nodes[v]` (the attribute dict), `g.nodes(data=True)`."""

    __slots__ = ("_g",)

    def __init__(self, graph: "LinkGraph") -> None:
        self._g = graph

    def __iter__(self) -> Iterator:
        return iter(self._g._node)

    def __len__(self) -> int:
        return len(self._g._node)

    def __contains__(self, v: object) -> bool:
        try:
            return v in self._g._node
        except TypeError:
            return False

    def __getitem__(self, v: Any) -> dict:
        return self._g._node[v]

    def items(self):
        return self._g._node.items()

    def __call__(self, data: bool | str = False, default: Any = None):
        if data is False:
            return self
        if data is True:
            return iter(self._g._node.items())
        return ((v, d.get(data, default)) for v, d in self._g._node.items())

    def data(self, data: bool | str = True, default: Any = None):
        return self(data, default)

    def __repr__(self) -> str:
        return f"NodeView({tuple(self._g._node)})"


class EdgeView:
    """`g.edges`: each edge once, in networkx's order (vertex by vertex in insertion order, a vertex's
    neighbours in insertion order, an edge at its first end); `g.edges[u, v]` is its attribute dict."""

    __slots__ = ("_g",)

    def __init__(self, graph: "LinkGraph") -> None:
        self._g = graph

    def _iter(self, nbunch: Any = None, data: bool | str = False, default: Any = None) -> Iterator:
        adj = self._g._adj
        seen: set = set()
        for u in _nbunch(self._g, nbunch):
            for v, d in adj[u].items():
                if v in seen:
                    continue
                if data is False:
                    yield (u, v)
                elif data is True:
                    yield (u, v, d)
                else:
                    yield (u, v, d.get(data, default))
            seen.add(u)

    def __call__(self, nbunch: Any = None, data: bool | str = False, default: Any = None) -> Iterator:
        return self._iter(nbunch, data, default)

    def __iter__(self) -> Iterator:
        return self._iter()

    def __len__(self) -> int:
        return self._g.number_of_edges()

    def __contains__(self, e: object) -> bool:
        try:
            u, v = e  # type: ignore[misc]
            return v in self._g._adj[u]
        except (KeyError, TypeError, ValueError):
            return False

    def __getitem__(self, e: tuple) -> dict:
        u, v = e
        return self._g._adj[u][v]

    def data(self, data: bool | str = True, default: Any = None, nbunch: Any = None) -> Iterator:
        return self._iter(nbunch, data, default)


class DegreeView:
    """`g.degree`, as networkx's: called with a vertex or indexed by one, its degree; else (vertex,
    degree) pairs."""

    __slots__ = ("_g",)

    def __init__(self, graph: "LinkGraph") -> None:
        self._g = graph

    def __getitem__(self, v: Any) -> int:
        row = self._g._adj[v]
        return len(row) + (v in row)

    def __call__(self, v: Any = None):
        return iter(self) if v is None else self[v]

    def __iter__(self) -> Iterator:
        return ((u, len(row) + (u in row)) for u, row in self._g._adj.items())

    def __len__(self) -> int:
        return len(self._g._adj)


class LinkGraph:
    """An undirected simple graph with vertex and edge attributes, stored and ordered like nx.Graph."""

    __networkx_backend__ = "networkx"  # networkx's own algorithms accept it where they only read _adj

    def __init__(self) -> None:
        self.graph: dict = {}
        self._node: dict[Any, dict] = {}
        self._adj: dict[Any, dict[Any, dict]] = {}

    # -- reading -------------------------------------------------------------------------------------
    @property
    def adj(self) -> dict[Any, dict[Any, dict]]:
        """{u: {v: edge attributes}} (the storage itself: read it, do not modify it)."""
        return self._adj

    @property
    def nodes(self) -> NodeView:
        return NodeView(self)

    @property
    def edges(self) -> EdgeView:
        return EdgeView(self)

    def __iter__(self) -> Iterator:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)

    def __contains__(self, v: object) -> bool:
        try:
            return v in self._node
        except TypeError:
            return False

    def __getitem__(self, u: Any) -> dict[Any, dict]:
        return self._adj[u]

    def has_node(self, v: Any) -> bool:
        return v in self

    def has_edge(self, u: Any, v: Any) -> bool:
        row = self._adj.get(u)
        return row is not None and v in row

    def neighbors(self, v: Any) -> Iterator:
        return iter(self._adj[v])

    @property
    def degree(self) -> "DegreeView":
        """`g.degree(v)` or `g.degree[v]`: edges at v (a self-loop counts twice, as in networkx);
        `g.degree()` or iterating `g.degree`: (vertex, degree) pairs."""
        return DegreeView(self)

    def number_of_nodes(self) -> int:
        return len(self._node)

    def number_of_edges(self) -> int:
        loops = sum(1 for u, row in self._adj.items() if u in row)
        return (sum(len(row) for row in self._adj.values()) - loops) // 2 + loops

    def is_directed(self) -> bool:
        return False

    def is_multigraph(self) -> bool:
        return False

    # -- building ------------------------------------------------------------------------------------
    def add_node(self, v: Any, **attr: Any) -> None:
        if v not in self._node:
            self._adj[v] = {}
            self._node[v] = attr
        else:
            self._node[v].update(attr)

    def add_nodes_from(self, nodes: Iterable, **attr: Any) -> None:
        """Vertices, or (vertex, attributes) pairs (networkx's rule: an unhashable item is a pair)."""
        for item in nodes:
            try:
                new = item not in self._node
                v, extra = item, attr
            except TypeError:
                v, data = item
                new = v not in self._node
                extra = dict(attr)
                extra.update(data)
            if new:
                self._adj[v] = {}
                self._node[v] = dict(extra)
            else:
                self._node[v].update(extra)

    def _edge_data(self, u: Any, v: Any) -> dict:
        """The attribute dict of edge u-v, shared by both directions (the edge and its nodes made if new)."""
        for x in (u, v):
            if x not in self._node:
                self._adj[x] = {}
                self._node[x] = {}
        data = self._adj[u].get(v)
        if data is None:
            data = self._adj[u][v] = self._adj[v][u] = {}
        return data

    def add_edge(self, u: Any, v: Any, **attr: Any) -> None:
        self._edge_data(u, v).update(attr)

    def add_edges_from(self, edges: Iterable, **attr: Any) -> None:
        """(u, v) or (u, v, attributes) items; each edge gets its own attribute dict (copied)."""
        for e in edges:
            if len(e) == 3:
                u, v, dd = e
            else:
                u, v = e
                dd = {}
            data = self._edge_data(u, v)
            data.update(attr)
            data.update(dd)

    def remove_edge(self, u: Any, v: Any) -> None:
        del self._adj[u][v]
        if u != v:
            del self._adj[v][u]

    def remove_edges_from(self, edges: Iterable) -> None:
        for e in edges:
            u, v = e[:2]
            if u in self._adj and v in self._adj[u]:
                self.remove_edge(u, v)

    # -- copies --------------------------------------------------------------------------------------
    def subgraph(self, nodes: Iterable) -> "LinkGraph":
        """A new graph on `nodes` (in this graph's order) and the edges among them; attribute dicts are
        shared with this graph, as networkx's subgraph views share them."""
        keep = {v for v in nodes if v in self._node}
        out = LinkGraph()
        out.graph = self.graph
        for v, d in self._node.items():
            if v in keep:
                out._node[v] = d
                out._adj[v] = {w: e for w, e in self._adj[v].items() if w in keep}
        return out

    def copy(self) -> "LinkGraph":
        """An independent copy made as nx.Graph.copy makes one (vertices, then every adjacency entry
        re-added in order, attribute dicts copied)."""
        out = LinkGraph()
        out.graph = dict(self.graph)
        out.add_nodes_from((v, dict(d)) for v, d in self._node.items())
        out.add_edges_from((u, w, dict(d)) for u, row in self._adj.items() for w, d in row.items())
        return out

    def to_networkx(self):
        """The same graph as an `nx.Graph` (same vertices, attributes, adjacency order; imports networkx)."""
        import networkx as nx

        g = nx.Graph()
        g.graph.update(self.graph)
        g.add_nodes_from((v, dict(d)) for v, d in self._node.items())
        copies: dict[int, dict] = {}
        for u, row in self._adj.items():
            g._adj[u].update((w, copies.setdefault(id(d), dict(d))) for w, d in row.items())
        return g

    def __repr__(self) -> str:
        return f"LinkGraph({self.number_of_nodes()} vertices, {self.number_of_edges()} edges)"
