"""The published suite's compression and TCP cases (issue 35): they load, carry the text their figure was read
from and its source, compare a compressed run with the same run uncompressed, and model the TCP cluster the
source states. Structural checks only: the suite's runner simulates them (`simdist validate --published`)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from simdist.io.load import load_scenario
from simdist.scenario import CompressionMethod
from simdist.validation.published.cases import CASES_FILE, Metric, PublishedCase, load_cases

COMPRESSED_TCP = {   # name -> the figure as the quote prints it
    "onebit-adam-vs-adam-squad-bert-large-32gpu-40gbe": "2.9x",
    "onebit-lamb-vs-lamb-bert-large-256gpu-40gbe": "2.8x",
}
TCP_COLLECTIVES = {"gloo-2node-40gbe-tcp-ring-chunked-20mb": "17251"}
FLOOR_FILE = CASES_FILE.parent / "floor.yaml"


@pytest.fixture(scope="module")
def cases() -> dict[str, PublishedCase]:
    return {c.name: c for c in load_cases().cases}


def _nodes(ref):
    return load_scenario(ref.file, list(ref.overrides)).cluster.node_groups


@pytest.mark.parametrize("name", sorted({**COMPRESSED_TCP, **TCP_COLLECTIVES}))
def test_case_carries_its_quote_and_source(cases, name):
    case = cases[name]
    figure = {**COMPRESSED_TCP, **TCP_COLLECTIVES}[name]
    assert figure in case.quote, f"{name}: the quote does not contain the figure {figure}"
    assert str(case.source.get("url", "")).startswith("https://"), f"{name}: no source address"
    assert case.reserved_check.startswith("not listed")
    assert case.config.strip()


@pytest.mark.parametrize("name", sorted(COMPRESSED_TCP))
def test_compressed_case_is_its_baseline_plus_the_codec(cases, name):
    """A ratio case compares the same scenario with and without DeepSpeed's 1-bit codec: the scenario's
    overrides are the baseline's plus the compression, so the ratio isolates the codec."""
    case = cases[name]
    assert case.metric is Metric.THROUGHPUT_RATIO and case.category == "compression"
    assert case.baseline is not None and case.baseline.file == case.scenario.file
    extra = [o for o in case.scenario.overrides if o not in case.baseline.overrides]
    assert list(case.baseline.overrides) == [o for o in case.scenario.overrides if o not in extra]
    assert extra and all(o.startswith("communication.compression") for o in extra)
    with_codec = load_scenario(case.scenario.file, list(case.scenario.overrides))
    without = load_scenario(case.baseline.file, list(case.baseline.overrides))
    assert with_codec.communication.compression.method is CompressionMethod.ONEBIT
    assert without.communication.compression is None or \
        without.communication.compression.method is CompressionMethod.NONE


@pytest.mark.parametrize("name", sorted({**COMPRESSED_TCP, **TCP_COLLECTIVES}))
def test_case_models_a_40gbe_tcp_cluster(cases, name):
    """Every one of these sources ran over 40 Gb/s Ethernet without RDMA: the scenario's NICs say so."""
    for group in _nodes(cases[name].scenario):
        assert group.nic.link.transport == "tcp"
        assert group.nic.link.bandwidth_Bps == pytest.approx(40e9 / 8)


def test_squad_case_runs_the_tutorials_batch(cases):
    """DeepSpeed's tutorial: total batch 96, 3 per GPU, sequence 384, on 32 GPUs (no accumulation)."""
    s = load_scenario(cases["onebit-adam-vs-adam-squad-bert-large-32gpu-40gbe"].scenario.file)
    gpus = sum(g.count * g.gpus_per_node for g in s.cluster.node_groups)
    assert (gpus, s.workload.batch_per_gpu, s.workload.seq_len) == (32, 3, 384)
    assert gpus * s.workload.batch_per_gpu * s.training.grad_accumulation == 96


def test_gloo_case_busbw_is_the_quoted_median():
    """20,000,000 B (5,000,000 fp32) over the quoted p50 of 17,251 us; busbw = algbw for two ranks."""
    case = {c.name: c for c in load_cases().cases}["gloo-2node-40gbe-tcp-ring-chunked-20mb"]
    assert re.search(r"5000000\s+14301\s+17251", case.quote)
    assert case.measured == pytest.approx(20e6 / 17251e-6 / 1e9, abs=1e-4)


def test_every_category_of_these_cases_has_a_floor(cases):
    floor = yaml.safe_load(Path(FLOOR_FILE).read_text())["mape_pct"]
    for name in {**COMPRESSED_TCP, **TCP_COLLECTIVES}:
        assert cases[name].category in floor
