"""topology.validate's rules cannot refuse a failure state's cluster when they passed the scenario's: io/ runs them
once, on the scenario's cluster, and topology.build only asserts (its _assert_derived_from_a_validated_cluster).
A failure state's cluster is the scenario's with node counts lowered (failures.step_time.shrunk_cluster); every
rule bounds the machine count from above or checks a node's own figures, so each shrunk cluster passes too."""
from __future__ import annotations

import copy
import itertools
from pathlib import Path

import pytest
import yaml

from simdist.failures.step_time import shrunk_cluster
from simdist.io.load import load_data
from simdist.topology.build import build_topology
from simdist.topology.validate import validate_cluster

REAL_CATALOGS = True
BASE = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml").read_text())
SMALL = {"gpu": "a100-sxm4-80gb", "gpus_per_node": 2, "intra_node": {"bandwidth": "300 GB/s"},
         "nic": {"bandwidth": "200 Gb/s", "count": 2}}
GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="host" for="node" attr.name="host" attr.type="boolean"/>
  <graph edgedefault="undirected">
    <node id="s0"/><node id="s1"/>
    {hosts}
    <edge source="s0" target="s1"/>
    {edges}
  </graph>
</graphml>
"""


def _graphml(tmp_path: Path, hosts: int) -> str:
    path = tmp_path / "fabric.graphml"
    path.write_text(GRAPHML.format(
        hosts="".join(f'<node id="h{i}"><data key="host">true</data></node>' for i in range(hosts)),
        edges="".join(f'<edge source="h{i}" target="s{i % 2}"/>' for i in range(hosts))))
    return str(path)


FABRICS = [
    ({"topology": "torus2d", "dims": [2, 3]}, [6]),
    ({"topology": "torus3d", "dims": [2, 2, 2]}, [8]),
    ({"topology": "torus2d"}, [6]),
    ({"topology": "ring"}, [4]),
    ({"topology": "fat_tree", "nodes_per_leaf": 2, "levels": 3, "leaves_per_pod": 2}, [3, 3]),
    ({"topology": "leaf_spine", "nodes_per_leaf": 2, "oversubscription": 2.0}, [5]),
    ({"topology": "custom", "graphml": "GRAPHML"}, [2, 3]),
]


@pytest.mark.parametrize("fabric, counts", FABRICS, ids=[f["topology"] + str(len(c)) for f, c in FABRICS])
def test_every_shrunk_cluster_of_a_valid_cluster_passes_the_rules_and_builds(tmp_path, fabric, counts):
    data = copy.deepcopy(BASE)
    fabric = {k: _graphml(tmp_path, sum(counts)) if v == "GRAPHML" else v for k, v in fabric.items()}
    data["cluster"] = {"nodes": [{**SMALL, "count": n} for n in counts], "fabric": fabric}
    data["workload"]["batch_per_gpu"] = 1
    scenario = load_data(data)
    nodes = sum(counts)
    for out in itertools.chain.from_iterable(itertools.combinations(range(nodes), k) for k in range(1, nodes)):
        shrunk = shrunk_cluster(scenario, frozenset(out))
        assert validate_cluster(shrunk) == [], out
        assert build_topology(shrunk).num_gpus == 2 * (nodes - len(out))
