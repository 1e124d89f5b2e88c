"""A broken custom GraphML fabric gets one error naming cluster.fabric.graphml, never 'no route' from deep inside."""
from __future__ import annotations

from simdist.topology.validate import validate_cluster
from tests.topology.factory import UNIFORM, cluster
from tests.topology.test_validate_bisection import GRAPHML


def issues(tmp_path, text: str | None, name: str = "f.graphml") -> list[str]:
    f = tmp_path / name
    if text is not None:
        f.write_text(text)
    return [str(i) for i in validate_cluster(cluster(3, "custom", UNIFORM, graphml=str(f)))]


def test_a_disconnected_host_is_named(tmp_path):
    cut = GRAPHML.replace('<edge source="r0" target="r1"><data key="bw">50 Gb/s</data><data key="lat">5 us</data>'
                          '<data key="eff">0.5</data></edge>', "")
    [msg] = issues(tmp_path, cut)
    assert msg.startswith("cluster.fabric.graphml:") and "'h2' cannot reach 'h0'" in msg and "disconnected" in msg


def test_an_edge_to_an_undeclared_vertex_is_named(tmp_path):
    [msg] = issues(tmp_path, GRAPHML.replace('<edge source="h2" target="r1"/>', '<edge source="h2" target="r9"/>'))
    assert msg.startswith("cluster.fabric.graphml:") and "no <node> declares: 'r9'" in msg


def test_missing_file_and_directory_are_reported_once_each(tmp_path):
    [missing] = issues(tmp_path, None)
    assert missing == f"cluster.fabric.graphml: no such file: {tmp_path / 'f.graphml'}"
    (tmp_path / "d.graphml").mkdir()
    [directory] = issues(tmp_path, None, "d.graphml")
    assert directory.endswith("is a directory; expected a GraphML file")


def test_a_missing_file_is_one_line_from_the_loader(tmp_path):
    from simdist.io.load import check_file

    (tmp_path / "s.yaml").write_text(
        "cluster:\n  nodes:\n    - {count: 2, gpu: a100-sxm4-80gb, gpus_per_node: 1, nic: {bandwidth: '100 Gb/s'}}\n"
        "  fabric: {topology: custom, graphml: nope.graphml}\nworkload: {model: resnet50, batch_per_gpu: 8}\n")
    found = [str(i) for i in check_file(tmp_path / "s.yaml")]
    assert found == [f"cluster.fabric.graphml: no such file: {tmp_path / 'nope.graphml'}"]
