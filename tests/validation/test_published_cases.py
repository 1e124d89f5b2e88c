"""The published-benchmark data file: every case parses, carries its source, quote, configuration and
scenario, cites no source reserved for the independent evaluation, and its scenarios load."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io.load import load_scenario
from simdist.validation.published.cases import CASES_FILE, Metric, load_cases

# Sources reserved for an independent evaluation of simdist (kept here on purpose, so that a case citing
# one fails this test even if the notes file moves). (repository, issue-or-PR number) pairs, repository
# files, and paper titles whose headline figures are reserved.
RESERVED_THREADS = {
    ("NVIDIA/nccl", n) for n in (1455, 1374, 450, 1161)
} | {
    ("NVIDIA/nccl-tests", n) for n in (149, 178, 119, 290, 44, 212, 194)
} | {
    ("aws-samples/deep-learning-models", 2), ("horovod/horovod", 44), ("horovod/horovod", 5),
    ("horovod/horovod", 288), ("horovod/horovod", 512), ("horovod/horovod", 578),
    ("pytorch/pytorch", 74148), ("huggingface/pytorch-image-models", 580), ("wenet-e2e/wenet", 791),
}
RESERVED_FILES = {
    ("Oneflow-Inc/DLPerf", "reports/dlperf_benchmark_test_report_v1.md"),
    ("Oneflow-Inc/DLPerf", "Megatron-LM/README.md"),
    ("Oneflow-Inc/DLPerf", "reports/GPT/dlperf_gpt_test_report_210512.md"),
    ("NVIDIA/DeepLearningExamples", "PyTorch/LanguageModeling/BERT/README.md"),
    ("pytorch/pytorch", "benchmarks/distributed/ddp/README.md"),
    ("nv-adlr/nv-adlr.github.io", "_projects/megatron-lm.md"),
    ("NVIDIA/Megatron-LM", "README.md"),
    ("pytorch/pytorch.github.io", "_posts/2024-03-13-maximizing-training.md"),
    ("tensorflow/tensorflow", "tensorflow/docs_src/performance/benchmarks.md"),
    ("horovod/horovod", "README.md"), ("horovod/horovod", "docs/benchmarks.md"),
    ("horovod/horovod", "docs/benchmarks.rst"),
    ("bytedance/byteps", "docs/performance.md"), ("bytedance/byteps", "README.md"),
    ("bytedance/byteps", "docs/gradient-compression.md"),
    ("bytedance/byteps", "docs/gradient-compression-proposal.md"),
    ("microsoft/DeepSpeed", "docs/_posts/2020-09-09-onebit-adam-blog-post.md"),
    ("apache/singa-doc", "docs-site/docs/benchmark-train.md"),
    ("huggingface/blog", "bloom-megatron-deepspeed.md"),
}
RESERVED_PREFIXES = {("bigscience-workshop/bigscience", "train/tr11-176B-ml/"),
                     ("facebookresearch/metaseq", "projects/OPT/chronicles/")}
RESERVED_PAPERS = ("llama 3 herd", "opt: open pre-trained", "megascale", "gemini", "fault tolerant llama", "whale")

RAW = yaml.safe_load(CASES_FILE.read_text())
DATA = load_cases()


def _threads_in(text: str) -> set[tuple[str, int]]:
    """(repo, number) pairs named in free text: 'owner/name#123', '.../owner/name/issues/123' or '/pull/123'."""
    found = {(m[0], int(m[1])) for m in re.findall(r"([\w.-]+/[\w.-]+)#(\d+)", text)}
    found |= {(m[0], int(m[1])) for m in re.findall(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)", text)}
    return found


def test_the_data_file_parses_into_at_least_40_cases() -> None:
    assert len(DATA.cases) >= 40
    assert len({c.name for c in DATA.cases}) == len(DATA.cases)


@pytest.mark.parametrize("case", DATA.cases, ids=lambda c: c.name)
def test_every_case_has_source_quote_config_and_scenario(case) -> None:
    assert case.source_text().strip()
    assert ("repo" in case.source and ({"issue", "pr", "file"} & set(case.source))) or "paper" in case.source
    assert len(case.quote) >= 20 and len(case.config) >= 20 and case.reserved_check
    assert case.scenario.file.is_file()
    m = case.measured
    shown = {f"{m:g}", f"{m:.2f}", f"{m * 100:.2f}", f"{m * 100:.1f}", f"{m * 100:g}"}
    assert any(t in case.quote for t in shown) or case.note, \
        f"{case.name}: the measured value is not in the quote and no note says how it was derived"
    if case.metric is Metric.THROUGHPUT_RATIO:
        assert case.baseline is not None and case.baseline.file.is_file()


@pytest.mark.parametrize("case", DATA.cases, ids=lambda c: c.name)
def test_no_case_cites_a_reserved_source(case) -> None:
    s = case.source
    repo = str(s.get("repo", ""))
    for key in ("issue", "pr"):
        if key in s:
            assert (repo, int(s[key])) not in RESERVED_THREADS, f"{case.name} cites reserved {repo}#{s[key]}"
    if "file" in s:
        assert (repo, s["file"]) not in RESERVED_FILES, f"{case.name} cites reserved file {repo}:{s['file']}"
        assert not any(repo == r and str(s["file"]).startswith(p) for r, p in RESERVED_PREFIXES)
    text = " ".join(str(v) for v in s.values()) + " " + case.quote + " " + case.config
    assert not (_threads_in(text) & RESERVED_THREADS), f"{case.name} mentions a reserved thread"
    paper = str(s.get("paper", "")).lower()
    assert not any(p in paper for p in RESERVED_PAPERS)


def test_the_reserved_check_catches_a_reserved_thread() -> None:
    """The check above can fail: a URL or repo#N of a reserved thread is recognised."""
    assert _threads_in("see https://github.com/NVIDIA/nccl-tests/issues/149") & RESERVED_THREADS
    assert _threads_in("as in horovod/horovod#288") & RESERVED_THREADS
    assert not _threads_in("NVIDIA/nccl-tests#29") & RESERVED_THREADS


def test_the_file_records_the_reserved_check_and_the_fitting_subset() -> None:
    assert "reserved" in DATA.reserved_sources_checked
    assert DATA.fit_subset == RAW["fit_subset"] and DATA.fitted


@pytest.mark.parametrize("case", DATA.cases, ids=lambda c: c.name)
def test_every_scenario_loads(case) -> None:
    extra = [f"workload.benchmark.sizes=['{case.size}']"] if case.size else []
    load_scenario(case.scenario.file, [*case.scenario.overrides, *extra])
    if case.baseline is not None:
        load_scenario(case.baseline.file, list(case.baseline.overrides))


def test_a_case_without_its_quote_is_refused(tmp_path: Path) -> None:
    raw = yaml.safe_load(CASES_FILE.read_text())
    del raw["cases"][0]["quote"]
    bad = tmp_path / "cases.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ScenarioError, match="quote"):
        load_cases(bad)


def _first_case_as(tmp_path: Path, **changes) -> Path:
    raw = yaml.safe_load(CASES_FILE.read_text())
    raw["cases"] = [dict(raw["cases"][0], **changes)]
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_baseline_is_taken_by_scaling_and_ratio_cases_only(tmp_path: Path) -> None:
    """A scaling_efficiency case may name a smaller baseline run (weak scaling against it); a bus bandwidth
    case may not, and an anchor (a single-GPU figure) does not go with a baseline run."""
    ref = {"file": "scenarios/tf-bert-pretraining-lamb-dgxa100.yaml"}
    ok = load_cases(_first_case_as(tmp_path, metric="scaling_efficiency", size=None, baseline=ref, measured=0.9))
    assert ok.cases[0].baseline is not None
    with pytest.raises(ScenarioError, match="baseline"):
        load_cases(_first_case_as(tmp_path, baseline=ref))   # the first case is a busbw_GBps case
    with pytest.raises(ScenarioError, match="anchor"):
        load_cases(_first_case_as(tmp_path, metric="scaling_efficiency", size=None, baseline=ref, measured=0.9,
                                  anchor={"single_gpu_throughput": 100.0, "quote": "1 GPU: 100"}))
