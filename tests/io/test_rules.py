"""io.rules: what the engine cannot run is refused at load with the key's path, every problem at once."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.io.overrides import set_path

REAL_CATALOGS = True  # conftest: the real catalogs (the scenarios name real hardware)

NODE = {"count": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
        "nic": {"bandwidth": "100 Gb/s"}}
GPT = {"gpt": {"layers": 4, "hidden": 128, "heads": 4, "vocab": 1000}}
BASE = {"cluster": {"nodes": [NODE]}, "workload": {"model": GPT, "seq_len": 64, "global_batch": 16}}


def issues(**changes) -> list[str]:
    """'path: message' of every issue loading BASE with the dotted `changes` gives ([] when it loads)."""
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        set_path(data, dotted.split("__"), copy.deepcopy(value))
    try:
        load_data(data)
    except ScenarioError as err:
        return [str(i) for i in err.issues]
    return []


def test_a_valid_scenario_loads():
    assert issues() == []


@pytest.mark.parametrize("changes, expected", [
    ({"training__parallelism": {"dp": 2, "tp": 2}}, "training.parallelism: dp x tp x pp = 2 x 2 x 1 = 4; expected "
                                                    "the cluster's 8 GPUs"),
    ({"training__parallelism": {"tp": 8}}, "training.parallelism.tp: got 8; expected a divisor of the 4 attention "
                                           "heads"),
    ({"training__parallelism": {"pp": 8}}, "training.parallelism.pp: got 8; expected pp x virtual_stages = 8 at most "
                                           "the model's 4 blocks"),
    ({"training__parallelism": {"pp": 2}, "training__micro_batch": 3},
     "training.micro_batch: got 3; expected a divisor of the per-replica batch 4"),
    ({"training__parallelism": {"pp": 2}, "training__schedule": "interleaved", "training__virtual_stages": 2,
      "workload__global_batch": 12}, "training.schedule: got 'interleaved'; expected a number of micro-batches (3) "
                                     "divisible by pp (2) for interleaving"),
    ({"training__sync": "asp"}, "training.sync: got 'asp'; expected bsp or local_sgd with an all-reduce strategy "
                                "(asp and ssp need communication.strategy: ps)"),
    ({"workload__global_batch": 12}, "workload.global_batch: got 12; expected a multiple of dp x grad_accumulation = "
                                     "8 x 1"),
    ({"workload__model": "resnet50", "workload__seq_len": None, "training__parallelism": {"tp": 2}},
     "training.parallelism.tp: got 2; expected 1 for resnet50: tensor parallelism splits transformer blocks "
     "({gpt: ...}, {bert: ...} or a transformer catalog model)"),
    ({"workload__model": "resnet50", "workload__seq_len": None, "training__parallelism": {"pp": 2}},
     "training.parallelism.pp: got '> 1'; expected 1 for resnet50: pipeline stages are cut between transformer "
     "blocks"),
])
def test_the_rule_names_the_key(changes, expected):
    assert expected in issues(**changes)


def test_every_problem_at_once_in_file_order():
    found = issues(training__sync="ssp", training__parallelism={"zero": 3}, communication__strategy="tree")
    assert [i.split(":")[0] for i in found] == ["training.sync", "training.sync", "communication.strategy"]


def test_host_servers_need_cpu_sockets_in_the_node_graph():
    found = issues(communication={"strategy": "ps", "ps": {"placement": "host", "server": "cpu", "servers": 1}},
                   cluster__nodes__0__intra_node={"bandwidth": "300 GB/s", "transport": "nvlink"})
    assert found == ["communication.ps.servers: got 1; expected at most the worker nodes' 0 CPU sockets for placement "
                     "host (a node's sockets are in the topology where its intra_node has a pcie_link)"]


@pytest.mark.parametrize("changes, why", [
    ({"communication": {"strategy": "ps", "ps": {"servers": 2}}}, "2 colocated parameter servers on 1 GPUs"),
    ({"training": {"parallelism": {"zero": 1}}, "communication": {"strategy": "halving_doubling"},
      "cluster": {"nodes": [{**NODE, "count": 4, "gpus_per_node": 1, "intra_node": {"link": "nvlink2"}}]}},
     "halving-doubling reduce_scatter / all_gather over 3 GPUs"),
])
def test_a_failure_state_io_cannot_see_is_unrunnable_not_a_crash(changes, why):
    """The rules check the scenario's cluster; a cluster that lost a node is the engine's to refuse, as
    InfeasibleError, which the goodput timeline records as an unrunnable state."""
    from simdist.engine.simulation import simulate

    data = copy.deepcopy(BASE)
    data["cluster"] = {"nodes": [{**NODE, "count": 2, "gpus_per_node": 1, "intra_node": {"link": "nvlink2"}}]}
    data["workload"] = {"model": GPT, "seq_len": 64, "batch_per_gpu": 4}
    data.update(copy.deepcopy(changes))
    data["failures"] = {"events": [{"at": "10 min", "kind": "node_down", "target": "node:1"}],
                        "recovery": {"policy": "elastic"}}
    data["run"] = {"duration": "1 h", "fidelity": "estimate"}
    goodput = simulate(load_data(data)).goodput.to_dict()
    assert any(why in text for text in goodput["unrunnable_states"].values()), goodput["unrunnable_states"]
