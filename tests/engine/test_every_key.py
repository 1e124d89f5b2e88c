"""Every key of the scenario schema either changes a result or is refused with an error naming it.

The schema is enumerated (so a new key without a case here fails the test); each case sets the key
to a different value in a context where it should matter and checks that the result JSON changes,
or that a ScenarioError names the key. `run.seed` is the documented exception: only stochastic
elements draw from the seeded generator, so without one the result must be the same.
"""
from __future__ import annotations

import copy
import json
import typing

import pytest
from pydantic import BaseModel

from simdist.errors import ScenarioError
from simdist.io.schema import ScenarioModel
from simdist.results.writers import result_json
from tests.strategies.scenario_runner import run_with

NIC = {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}
TRAIN = {
    "name": "keys",
    "cluster": {"nodes": [{"count": 4, "gpu": "v100-sxm2-32gb", "gpus_per_node": 2, "intra_node": {"link": "pcie-gen3"},
                           "nic": dict(NIC)}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 4, "warmup": 1, "fidelity": "estimate"},
}
BENCH = copy.deepcopy(TRAIN)
BENCH["workload"] = {"benchmark": {"op": "all_reduce", "sizes": ["1 MB", "64 MB"]}}
BENCH["run"] = {"fidelity": "estimate"}
FAT = {"cluster.fabric": {"topology": "fat_tree", "nodes_per_leaf": 2, "link": {"bandwidth": "100 Gb/s"}}}
STRAGGLER = {"failures": {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:3", "slowdown": 2.0}]}}
PS = {"communication.strategy": "ps", "communication.ps": {"servers": 2, "placement": "dedicated"}}
SIM = {"run.fidelity": "simulate"}
V100_BASE = {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb"}}
DOWN = {"at": "10 h", "kind": "node_down", "target": "node:1"}
JITTER = {"at": "0 s", "kind": "network_jitter", "delay": "5 ms", "duration": "1 d"}
GPT = {"workload.model": {"gpt": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}}, "workload.seq_len": 128}
BERT = {"workload.model": {"bert": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}}, "workload.seq_len": 128}
LAYERS = {"workload.model": {"layers": [{"name": "fc", "kind": "linear", "params": 1000000, "fwd_flops": 2000000}],
                             "name": "a"}}
TORCH = {"workload.model": {"torch": "tests.workload.tiny_models:tiny_cnn", "input_shape": [1, 3, 8, 8]}}
MPW = {"workload": {"model": {"gpt": {"layers": 8, "hidden": 256, "heads": 4, "vocab": 1000}}, "seq_len": 128,
                    "global_batch": 8, "precision": "fp16"}}
MP = {**MPW, "training.parallelism": {"tp": 2, "pp": 2}}  # 8 GPUs: dp 2 x tp 2 x pp 2
# a mixture-of-experts model (128 experts, top-8) on one 8-GPU H200 node; the cases add their parallelism
MOE = {"cluster.nodes": [{"count": 1, "gpu": "h200-sxm-141gb", "gpus_per_node": 8, "intra_node": "nvswitch-h100",
                          "nic": {"bandwidth": "400 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}],
       "workload": {"model": "qwen3-30b-a3b", "seq_len": 512, "global_batch": 16, "precision": "bf16"},
       "training.optimizer": "adam", "communication.backend": "nccl"}
# 2 GPUs per node on 8 cores, 2 workers each at 4 ms per sample: 500 samples/s per GPU, below the V100's step
LOADER = {"workload.input_pipeline": {"workers_per_gpu": 2, "host_cores": 8, "cpu_per_sample": "4 ms"}}
MIXED_NODES = [TRAIN["cluster"]["nodes"][0], {**TRAIN["cluster"]["nodes"][0], "gpu": "a100-sxm4-80gb", "count": 2}]
FAIL_RUN = {"run": {"duration": "3 d", "fidelity": "estimate", "warmup": 1}, "cluster.nodes": MIXED_NODES}  # nodes 0-3 V100, 4-5 A100
GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="host" for="node" attr.name="host" attr.type="string"/>
  <key id="bw" for="edge" attr.name="bandwidth" attr.type="string"/>
  <graph edgedefault="undirected">
    <node id="h0"><data key="host">true</data></node>
    <node id="h1"><data key="host">true</data></node>
    <node id="h2"><data key="host">true</data></node>
    <node id="h3"><data key="host">true</data></node>
    <node id="r0"/>
    <node id="r1"/>
    <edge source="h0" target="r0"/>
    <edge source="h1" target="r0"/>
    <edge source="r0" target="r1"><data key="bw">CORE</data></edge>
    <edge source="h2" target="r1"/>
    <edge source="h3" target="r1"/>
  </graph>
</graphml>
"""

# key -> (base, context, change, expected): expected "changes", "same", or the path a ScenarioError names
CASES: dict[str, tuple] = {
    "name": (TRAIN, {}, {"name": "other"}, "changes"),
    "cluster.nodes.count": (TRAIN, {}, {"cluster.nodes.0.count": 2}, "changes"),
    "cluster.nodes.gpus_per_node": (TRAIN, {}, {"cluster.nodes.0.gpus_per_node": 1}, "changes"),
    # a GPU given inline (a catalog key is the other form): the catalog V100 as a base, each figure overridden
    "cluster.nodes.gpu.base": (TRAIN, {}, {"cluster.nodes.0.gpu": {"base": "a100-sxm4-80gb"}}, "changes"),
    "cluster.nodes.gpu.peak_flops": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.peak_flops": {"fp16": "10 TFLOP/s"}}, "changes"),
    "cluster.nodes.gpu.memory": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.memory": "16 GB"}, "changes"),
    "cluster.nodes.gpu.memory_bandwidth": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.memory_bandwidth": "100 GB/s"}, "changes"),
    "cluster.nodes.gpu.price_per_hour_usd": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.price_per_hour_usd": 9.0}, "changes"),
    "cluster.nodes.gpu.price_basis": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.price_basis": "a quote"}, "changes"),
    "cluster.nodes.gpu.price_date": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.price_date": "2020-01"}, "changes"),
    "cluster.nodes.gpu.compute_efficiency": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.compute_efficiency": 0.1}, "changes"),
    "cluster.nodes.gpu.comm_interference": (TRAIN, V100_BASE, {"cluster.nodes.0.gpu.comm_interference": 0.5}, "changes"),
    # an RTX 4090 (no PCIe peer-to-peer) given it: ring traffic no longer staged through host memory
    "cluster.nodes.gpu.pcie_p2p": (TRAIN, {"cluster.nodes.0.gpu": {"base": "rtx4090-24gb"},
                                          "cluster.nodes.0.intra_node": "pcie-gen4", "cluster.nodes.0.gpus_per_node": 8},
                                   {"cluster.nodes.0.gpu.pcie_p2p": True}, "changes"),
    # vendor cpu: the codec runs on CPU cores
    "cluster.nodes.gpu.vendor": (TRAIN, {**V100_BASE, "communication.compression": {"method": "topk", "ratio": 0.01}},
                                 {"cluster.nodes.0.gpu.vendor": "cpu"}, "changes"),
    # a calibration profile names its GPU by key or name
    "cluster.nodes.gpu.name": (TRAIN, {"cluster.nodes.0.gpu": {"peak_flops": {"fp32": "15 TFLOP/s", "fp16": "125 TFLOP/s"},
                                                               "memory": "32 GB", "memory_bandwidth": "900 GB/s"},
                                       "calibration": "@profile"}, {"cluster.nodes.0.gpu.name": "v100-sxm2-32gb"}, "changes"),
    "cluster.nodes.intra_node.link": (TRAIN, {}, {"cluster.nodes.0.intra_node.link": "nvlink5"}, "changes"),
    "cluster.nodes.intra_node.bandwidth": (TRAIN, {}, {"cluster.nodes.0.intra_node.bandwidth": "1 GB/s"}, "changes"),
    "cluster.nodes.intra_node.latency": (TRAIN, {}, {"cluster.nodes.0.intra_node.latency": "1 ms"}, "changes"),
    "cluster.nodes.intra_node.efficiency": (TRAIN, {}, {"cluster.nodes.0.intra_node.efficiency": 0.05}, "changes"),
    "cluster.nodes.intra_node.transport": (TRAIN, {"cluster.nodes.0.intra_node": {"bandwidth": "1 GB/s"}},
                                           {"cluster.nodes.0.intra_node.transport": "pcie"}, "changes"),
    "cluster.nodes.intra_node.base": (TRAIN, {}, {"cluster.nodes.0.intra_node": {"base": "pcie-gen5"}}, "changes"),
    "cluster.nodes.intra_node.layout": (TRAIN, {}, {"cluster.nodes.0.intra_node.layout": "ring"},
                                        "cluster.nodes.0.intra_node"),
    "cluster.nodes.nic.link": (TRAIN, {}, {"cluster.nodes.0.nic": {"link": "ib-edr"}}, "changes"),
    "cluster.nodes.nic.bandwidth": (TRAIN, {}, {"cluster.nodes.0.nic.bandwidth": "10 Gb/s"}, "changes"),
    "cluster.nodes.nic.latency": (TRAIN, {}, {"cluster.nodes.0.nic.latency": "1 ms"}, "changes"),
    "cluster.nodes.nic.efficiency": (TRAIN, {}, {"cluster.nodes.0.nic.efficiency": 0.05}, "changes"),
    "cluster.nodes.nic.transport": (TRAIN, {}, {"cluster.nodes.0.nic.transport": "tcp"}, "changes"),
    "cluster.nodes.nic.count": (TRAIN, {}, {"cluster.nodes.0.nic.count": 2}, "changes"),
    "cluster.nodes.nic.gpudirect": (TRAIN, {}, {"cluster.nodes.0.nic.gpudirect": False}, "changes"),
    "cluster.nodes.nic.flow_cap": (TRAIN, {}, {"cluster.nodes.0.nic.flow_cap": "5 Gb/s"}, "changes"),
    "cluster.nodes.nic.stream_cap": (TRAIN, {"cluster.nodes.0.nic.transport": "tcp"},
                                     {"cluster.nodes.0.nic.stream_cap": "5 Gb/s"}, "changes"),
    "cluster.fabric.topology": (TRAIN, {}, {"cluster.fabric": FAT["cluster.fabric"]}, "changes"),
    "cluster.fabric.nodes_per_leaf": (TRAIN, FAT, {"cluster.fabric.nodes_per_leaf": 1}, "changes"),
    "cluster.fabric.oversubscription": (TRAIN, FAT, {"cluster.fabric.oversubscription": 4.0}, "changes"),
    "cluster.fabric.routing": (TRAIN, {**FAT, "communication.strategy": "halving_doubling",
                                       "cluster.fabric.link": {"bandwidth": "10 Gb/s"}},
                               {"cluster.fabric.routing": "spray"}, "changes"),
    # SHARP switches alone change nothing (NCCL leaves CollNet off): refused; with collnet they do
    "cluster.fabric.sharp": (BENCH, {"communication.backend": "nccl"}, {"cluster.fabric.sharp": True},
                             "cluster.fabric.sharp"),
    "cluster.fabric.link.link": (TRAIN, {**FAT, "cluster.fabric.link": {"link": "eth-10g"}},
                                 {"cluster.fabric.link": {"link": "eth-1g"}}, "changes"),
    **{f"cluster.fabric.link.{k}": (TRAIN, {**FAT, "cluster.fabric.link": {"bandwidth": "10 Gb/s", "transport": "rdma"}},
                                    {f"cluster.fabric.link.{k}": v}, "changes")
       for k, v in (("bandwidth", "1 Gb/s"), ("latency", "1 ms"), ("efficiency", 0.1), ("transport", "tcp"))},
    "cluster.fabric.levels": (TRAIN, {**FAT, "cluster.nodes.0.count": 8},
                              {"cluster.fabric.levels": 3, "cluster.fabric.leaves_per_pod": 2}, "changes"),
    "cluster.fabric.leaves_per_pod": (TRAIN, {**FAT, "cluster.nodes.0.count": 8, "cluster.fabric.levels": 3,
                                              "cluster.fabric.leaves_per_pod": 2},
                                      {"cluster.fabric.leaves_per_pod": 4}, "changes"),
    "cluster.fabric.dims": (TRAIN, {"cluster.fabric": {"topology": "torus2d", "dims": [2, 2],
                                                       "link": {"bandwidth": "100 Gb/s"}}},
                            {"cluster.fabric.dims": [4, 1]}, "changes"),
    "cluster.fabric.graphml": (TRAIN, {"cluster.fabric": {"topology": "custom", "graphml": "@fast",
                                                          "link": {"bandwidth": "100 Gb/s"}}},
                               {"cluster.fabric.graphml": "@slow"}, "changes"),
    **{f"workload.model.{fam}.{k}": (TRAIN, ctx, {f"workload.model.{fam}.{k}": v}, "changes")
       for fam, ctx in (("gpt", GPT), ("bert", BERT))
       for k, v in (("layers", 3), ("hidden", 512), ("heads", 8), ("vocab", 5000), ("ffn_hidden", 256))},
    "workload.model.torch": (TRAIN, TORCH, {"workload.model.torch": "tests.workload.tiny_models:tiny_mlp",
                                            "workload.model.input_shape": [1, 8]}, "changes"),
    "workload.model.input_shape": (TRAIN, TORCH, {"workload.model.input_shape": [1, 3, 9, 9]}, "changes"),
    "workload.model.layers": (TRAIN, LAYERS, {"workload.model.layers.0.params": 4000000}, "changes"),
    "workload.model.name": (TRAIN, LAYERS, {"workload.model.name": "b"}, "changes"),
    "workload.benchmark.op": (BENCH, {}, {"workload.benchmark.op": "all_gather"}, "changes"),
    "workload.benchmark.sizes": (BENCH, {}, {"workload.benchmark.sizes": ["2 MB"]}, "changes"),
    "workload.batch_per_gpu": (TRAIN, {}, {"workload.batch_per_gpu": 16}, "changes"),
    "workload.global_batch": (TRAIN, {"workload": {"model": "resnet50", "global_batch": 256, "precision": "fp16"}},
                              {"workload.global_batch": 128}, "changes"),
    "workload.precision": (TRAIN, {}, {"workload.precision": "fp32"}, "changes"),
    "workload.seq_len": (TRAIN, {"workload": {"model": "gpt2", "batch_per_gpu": 2, "precision": "bf16", "seq_len": 256}},
                         {"workload.seq_len": 512}, "changes"),
    "workload.grad_dtype": (TRAIN, {}, {"workload.grad_dtype": "fp16"}, "changes"),
    "workload.flash_attention": (TRAIN, GPT, {"workload.flash_attention": True}, "changes"),
    "workload.dropout": (TRAIN, GPT, {"workload.dropout": 0.0}, "changes"),
    "workload.fused_kernels": (TRAIN, GPT, {"workload.fused_kernels": False}, "changes"),
    "workload.causal_attention": (TRAIN, {**GPT, "workload.seq_len": 1024, "workload.flash_attention": True},
                                  {"workload.causal_attention": True}, "changes"),
    # Transformer Engine's fp8 scaling and FP8 attention: an fp8 transformer on Hopper
    "workload.fp8_recipe": (TRAIN, {**GPT, "cluster.nodes.0.gpu": "h100-sxm5-80gb", "workload.precision": "fp8"},
                            {"workload.fp8_recipe": "current"}, "changes"),
    "workload.fp8_attention": (TRAIN, {**GPT, "cluster.nodes.0.gpu": "h100-sxm5-80gb", "workload.precision": "fp8",
                                       "workload.flash_attention": True}, {"workload.fp8_attention": True}, "changes"),
    "workload.input_pipeline.cpu_per_sample": (TRAIN, LOADER, {"workload.input_pipeline.cpu_per_sample": "2 ms"},
                                               "changes"),
    "workload.input_pipeline.workers_per_gpu": (TRAIN, LOADER, {"workload.input_pipeline.workers_per_gpu": 3},
                                                "changes"),
    "workload.input_pipeline.host_cores": (TRAIN, LOADER, {"workload.input_pipeline.host_cores": 4}, "changes"),
    # the loader's cost measured on the reference CPU, scaled to a slower host CPU (the node's is unknown here)
    "workload.input_pipeline.host_cpu": (TRAIN, {"workload.input_pipeline": {**LOADER["workload.input_pipeline"],
                                                                            "measured_on": "epyc-genoa-dev"}},
                                         {"workload.input_pipeline.host_cpu": "xeon-e5-2698-v4"}, "changes"),
    "workload.input_pipeline.measured_on": (TRAIN, {"workload.input_pipeline": {**LOADER["workload.input_pipeline"],
                                                                               "host_cpu": "xeon-e5-2698-v4"}},
                                            {"workload.input_pipeline.measured_on": "epyc-genoa-dev"}, "changes"),
    "workload.single_gpu_throughput": (TRAIN, {}, {"workload.single_gpu_throughput": 500}, "changes"),
    "workload.memory_format": (TRAIN, {}, {"workload.memory_format": "nchw"}, "changes"),
    "training.parallelism.dp": (TRAIN, {}, {"training.parallelism.dp": 4}, "training.parallelism"),
    "training.parallelism.tp": (TRAIN, {**MPW, "training.parallelism": {"pp": 2}}, {"training.parallelism.tp": 2},
                                "changes"),
    "training.parallelism.pp": (TRAIN, {**MPW, "training.parallelism": {"tp": 2}}, {"training.parallelism.pp": 2},
                                "changes"),
    "training.parallelism.zero": (TRAIN, {}, {"training.parallelism.zero": 1}, "changes"),
    "training.parallelism.cp": (TRAIN, {**MP, "workload.flash_attention": True}, {"training.parallelism.cp": 2},
                                "changes"),  # dp 2 -> 1: the sequence split over 2 ranks
    "training.cp_comm_type": (TRAIN, {**MP, "workload.flash_attention": True,
                                      "training.parallelism": {"tp": 2, "pp": 2, "cp": 2}},
                              {"training.cp_comm_type": "all_gather"}, "changes"),
    "training.parallelism.ep": (TRAIN, {**MOE, "training.parallelism": {"pp": 4, "zero": 1}},
                                {"training.parallelism.ep": 2}, "changes"),
    "training.parallelism.etp": (TRAIN, {**MOE, "training.parallelism": {"pp": 2, "tp": 2, "zero": 1},
                                         "training.sequence_parallel": True}, {"training.parallelism.etp": 1},
                                 "changes"),  # default tp: the experts split over the tp ranks, or whole
    "training.moe_load_imbalance": (TRAIN, {**MOE, "training.parallelism": {"pp": 4, "zero": 1, "ep": 2}},
                                    {"training.moe_load_imbalance": 4.0}, "changes"),
    "training.micro_batch": (TRAIN, MP, {"training.micro_batch": 2}, "changes"),
    "training.schedule": (TRAIN, MP, {"training.schedule": "gpipe"}, "changes"),
    "training.sync": (TRAIN, {}, {"training.sync": "local_sgd"}, "changes"),
    "training.staleness": (TRAIN, {**PS, **STRAGGLER, **SIM, "training.sync": "ssp"},
                           {"training.staleness": 3}, "changes"),
    "training.local_steps": (TRAIN, {"training.sync": "local_sgd"}, {"training.local_steps": 4}, "changes"),
    "training.grad_accumulation": (TRAIN, {}, {"training.grad_accumulation": 2}, "changes"),
    "training.batch_split": (TRAIN, {"cluster.nodes": MIXED_NODES}, {"training.batch_split": "proportional"}, "changes"),
    "training.hybrid_switch": (TRAIN, {**PS, **STRAGGLER, "training.sync": "hybrid", "training.hybrid_switch": 1},
                               {"training.hybrid_switch": "75%"}, "changes"),
    "training.rebalance_every": (TRAIN, {**STRAGGLER, "training.batch_split": "dynamic", "run.iterations": 8},
                                 {"training.rebalance_every": 2}, "changes"),
    "training.optimizer": (TRAIN, {}, {"training.optimizer": "adam"}, "changes"),
    "training.optimizer_kernels": (TRAIN, {"training.optimizer": "adam"}, {"training.optimizer_kernels": "unfused"},
                                   "changes"),
    "training.grad_clipping": (TRAIN, {}, {"training.grad_clipping": "global_norm"}, "changes"),
    "training.loss_scaling": (TRAIN, {}, {"training.loss_scaling": "dynamic"}, "changes"),
    "training.grad_processing": (TRAIN, {"training.grad_clipping": "global_norm", "training.grad_accumulation": 2},
                                 {"training.grad_processing": "per_micro_batch"}, "changes"),
    "training.convergence_factor": (TRAIN, {}, {"training.convergence_factor": 1.5}, "changes"),
    # model-parallel keys (they only matter with tp or pp > 1: refused otherwise, see resolve.py)
    "training.placement_order": (TRAIN, MP, {"training.placement_order": "pp,dp,tp"}, "changes"),
    "training.sequence_parallel": (TRAIN, MP, {"training.sequence_parallel": True}, "changes"),
    "training.tp_comm_overlap": (TRAIN, {**MP, "training.sequence_parallel": True}, {"training.tp_comm_overlap": True},
                                 "changes"),
    "training.recompute": (TRAIN, MP, {"training.recompute": "full"}, "changes"),
    "training.fp8_param_gather": (TRAIN, {**GPT, "cluster.nodes.0.gpu": "h100-sxm5-80gb", "workload.precision": "fp8",
                                          "training.parallelism": {"zero": 3}},
                                  {"training.fp8_param_gather": True}, "changes"),
    "training.recompute_modules": (TRAIN, {**MP, "training.recompute": "selective"},
                                   {"training.recompute_modules": ["core_attn", "mlp"]}, "changes"),
    "training.recompute_every": (TRAIN, {**MPW, "training.parallelism": {"zero": "fsdp"}, "training.recompute": "full"},
                                 {"training.recompute_every": 2}, "changes"),
    "training.virtual_stages": (TRAIN, {**MP, "training.schedule": "interleaved", "training.virtual_stages": 2},
                                {"training.virtual_stages": 4}, "changes"),
    "training.cuda_graphs": (TRAIN, {}, {"training.cuda_graphs": True}, "changes"),
    "workload.moe_capacity_factor": (TRAIN, {"workload": {"model": "qwen3-30b-a3b", "seq_len": 256, "batch_per_gpu": 1,
                                                   "precision": "bf16"}, "cluster.nodes.0.gpu": "h100-sxm5-80gb",
                                      "training.parallelism": {"zero": 3}},
                                     {"workload.moe_capacity_factor": 1.5}, "changes"),
    "training.finetune.method": (TRAIN, {**GPT, "training.finetune": {"method": "lora", "rank": 8}},
                                 {"training.finetune.method": "full"}, "training.finetune.method"),
    "training.finetune.rank": (TRAIN, {**GPT, "training.finetune": {"method": "lora", "rank": 8}},
                               {"training.finetune.rank": 64}, "changes"),
    "training.finetune.target_modules": (TRAIN, {**GPT, "training.finetune": {"method": "lora", "rank": 8}},
                                         {"training.finetune.target_modules": ["attention"]}, "changes"),
    "workload.packed_sequences.document_tokens": (
        TRAIN, {**GPT, "workload.flash_attention": True, "workload.packed_sequences": {"document_tokens": 64}},
        {"workload.packed_sequences.document_tokens": 16}, "changes"),
    "communication.strategy": (TRAIN, {}, {"communication.strategy": "tree"}, "changes"),
    "communication.backend": (TRAIN, {}, {"communication.backend": "nccl"}, "changes"),
    "communication.hierarchical.intra": (TRAIN, {"communication.strategy": "hierarchical"},
                                         {"communication.hierarchical.intra": "tree"}, "changes"),
    "communication.hierarchical.inter": (TRAIN, {"communication.strategy": "hierarchical"},
                                         {"communication.hierarchical.inter": "tree"}, "changes"),
    "communication.ps.servers": (TRAIN, PS, {"communication.ps.servers": 1}, "changes"),
    "communication.ps.aggregation": (TRAIN, PS, {"communication.ps.aggregation": "gpu"}, "changes"),  # default node
    "communication.ps.server": (TRAIN, PS, {"communication.ps.server": "cpu"}, "changes"),
    "communication.ps.placement": (TRAIN, PS, {"communication.ps.placement": "colocated"}, "changes"),
    "communication.ps.partition": (TRAIN, PS, {"communication.ps.partition": "4 MB"}, "changes"),
    "communication.bucket_size": (TRAIN, {}, {"communication.bucket_size": "4 MB"}, "changes"),
    "communication.first_bucket_size": (TRAIN, {}, {"communication.first_bucket_size": "1 MB"}, "changes"),
    "communication.bucketing": (TRAIN, {"communication.bucket_size": "4 MB"}, {"communication.bucketing": "fusion"},
                                "changes"),
    "communication.fusion_cycle": (TRAIN, {}, {"communication.fusion_cycle": "20 ms"}, "changes"),
    "communication.ddp_average": (TRAIN, {}, {"communication.ddp_average": "per_bucket"}, "changes"),
    # DDP's copy of each reduced bucket into .grad is gone, and the gradient buffer beside the buckets with it
    "communication.gradient_as_bucket_view": (TRAIN, {}, {"communication.gradient_as_bucket_view": True}, "changes"),
    "communication.overlap": (TRAIN, {}, {"communication.overlap": False}, "changes"),
    "communication.collnet": (BENCH, {"communication.backend": "nccl"},
                              {"cluster.fabric.sharp": True, "communication.collnet": True}, "changes"),
    # NVLS needs third-generation NVSwitch nodes: on two H100 nodes NCCL's tuner takes NVLSTree unless it is off
    "communication.nvls": (BENCH, {"communication.backend": "nccl", "cluster.nodes.0.count": 2,
                                   "cluster.nodes.0.gpu": "h100-sxm5-80gb", "cluster.nodes.0.gpus_per_node": 8,
                                   "cluster.nodes.0.intra_node": "nvswitch-h100"},
                           {"communication.nvls": False}, "changes"),
    # NCCL_ALGO / NCCL_PROTO: on two H100 nodes the tuner's NVLSTree gives way to the rings, Simple to LL
    "communication.nccl_algo": (BENCH, {"communication.backend": "nccl", "cluster.nodes.0.count": 2,
                                        "cluster.nodes.0.gpu": "h100-sxm5-80gb", "cluster.nodes.0.gpus_per_node": 8,
                                        "cluster.nodes.0.intra_node": "nvswitch-h100"},
                                {"communication.nccl_algo": "Ring"}, "changes"),
    "communication.nccl_proto": (BENCH, {"communication.backend": "nccl"}, {"communication.nccl_proto": "LL"},
                                 "changes"),
    # NCCL_SOCKET_NTHREADS on a 100 GbE tcp NIC: helper threads per connection instead of the rank's proxy thread
    "communication.nccl_socket_threads": (BENCH, {"communication.backend": "nccl", "cluster.nodes.0.nic":
                                                  {"bandwidth": "100 Gb/s", "latency": "25 us", "transport": "tcp"}},
                                          {"communication.nccl_socket_threads": 2}, "changes"),
    "communication.compression.method": (TRAIN, {}, {"communication.compression": {"method": "fp16"}}, "changes"),
    "communication.compression.ratio": (TRAIN, {"communication.compression": {"method": "topk", "ratio": 0.01}},
                                        {"communication.compression.ratio": 0.1}, "changes"),
    "communication.compression.rank": (TRAIN, {"communication.compression": {"method": "powersgd", "rank": 4}},
                                       {"communication.compression.rank": 8}, "changes"),
    "communication.compression.error_feedback": (TRAIN, {"communication.compression": {"method": "topk", "ratio": 0.01}},
                                                 {"communication.compression.error_feedback": False}, "changes"),
    # failures: a failure run over run.duration (the goodput timeline); each key changes its figures
    **{f"failures.events.{k}": (TRAIN, {**FAIL_RUN, "failures.events": [ev],
                                        **(FAT if k == "factor" else {})},
                                {f"failures.events.0.{k}": v} if k != "kind" else
                                {"failures.events.0": {"at": "10 h", "kind": "gpu_down", "target": "gpu:1"}}, "changes")
       for k, ev, v in (
           ("at", DOWN, "20 h"),
           ("kind", DOWN, "gpu_down"),
           ("target", {"at": "1 h", "kind": "straggler", "target": "gpu:1", "slowdown": 2.0, "duration": "1 d"}, "gpu:9"),
           ("factor", {"at": "1 h", "kind": "link_degrade", "target": "link:leaf0-spine0", "factor": 0.5,
                       "duration": "1 d"}, 0.1),
           ("slowdown", {"at": "1 h", "kind": "straggler", "target": "gpu:1", "slowdown": 2.0, "duration": "1 d"}, 4.0),
           ("duration", {"at": "1 h", "kind": "straggler", "target": "gpu:1", "slowdown": 2.0, "duration": "1 d"}, "2 d"),
           ("delay", JITTER, "20 ms"),
           ("sigma", JITTER, 1.0))},
    **{f"failures.maintenance.{k}": (TRAIN, {**FAIL_RUN, "failures.maintenance": {"interval": "1 d", "duration": "1 h"}},
                                     {f"failures.maintenance.{k}": v}, "changes")
       for k, v in (("interval", "12 h"), ("duration", "3 h"), ("first", "2 h"))},
    **{f"failures.random.{k}": (TRAIN, {**FAIL_RUN, "failures.random": {"node_mtbf": "50 h", **ctx}},
                                {f"failures.random.{k}": v}, "changes")
       for k, v, ctx in (
           ("gpu_mtbf", "20 h", {}), ("node_mtbf", "10 h", {}), ("nic_mtbf", "20 h", {}), ("link_mtbf", "20 h", {}),
           ("switch_mtbf", "20 h", {}), ("distribution", "weibull", {}),
           ("weibull_shape", 1.5, {"distribution": "weibull"}), ("repair", "6 h", {}), ("repair_sigma", 1.0, {}),
           ("lemon_fraction", 0.5, {}), ("lemon_factor", 50.0, {"lemon_fraction": 0.5}))},
    **{f"failures.recovery.{k}": (TRAIN, {**FAIL_RUN, "failures.events": [DOWN], "failures.recovery": ctx},
                                  {f"failures.recovery.{k}": v}, "changes")
       for k, v, ctx in (
           ("policy", "elastic", {}), ("checkpoint_interval", "2 h", {}), ("checkpoint_write", "10 min", {}),
           ("storage_bandwidth", "100 MB/s", {}), ("checkpoint_async", True, {}),
           ("snapshot_bandwidth", "10 MB/s", {"checkpoint_async": True}), ("detection", "10 min", {}),
           ("restart", "20 min", {}), ("persistent_interval", "8 h", {"policy": "in_memory"}),
           ("spares", 2, {"policy": "spares"}), ("spare_delay", "20 min", {"policy": "spares", "spares": 1}),
           ("replica_groups", 2, {"policy": "replica_groups"}))},
    "run.iterations": (TRAIN, SIM, {"run.iterations": 8}, "changes"),
    "run.duration": (TRAIN, {"run": {"fidelity": "estimate"}}, {"run.duration": "10 s"}, "changes"),
    "run.warmup": (TRAIN, {**PS, **SIM, "training.sync": "asp"}, {"run.warmup": 2}, "changes"),
    "run.seed": (TRAIN, {}, {"run.seed": 5}, "same"),
    "run.replicas": (TRAIN, {}, {"run.replicas": 2}, "run.replicas"),
    "run.fidelity": (TRAIN, {}, {"run.fidelity": "simulate"}, "changes"),
    "calibration": (TRAIN, {}, {"calibration": "@profile"}, "changes"),
}


def _leaves(model: type, prefix: str = "") -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        path = prefix + (f.alias or name)
        subs = _models_in(f.annotation)
        out += [k for s in subs for k in _leaves(s, path + ".")] if subs else [path]
    return out


def _models_in(annotation, depth: int = 0) -> list[type]:
    """The pydantic models inside an annotation, through Optional / Union / Annotated / list nesting."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if depth > 6:
        return []
    found = []
    for arg in typing.get_args(annotation):
        found += [m for m in _models_in(arg, depth + 1) if m not in found]
    return found


def test_every_schema_key_has_a_case():
    keys = set(_leaves(ScenarioModel))
    assert keys - set(CASES) == set(), "add a case for each new scenario key"
    assert set(CASES) - keys == set(), "a case for a key the schema no longer has"


def _files(tmp_path, value):
    """'@fast' / '@slow' / '@profile' name files written for the case."""
    if not isinstance(value, str) or not value.startswith("@"):
        return value
    name = value[1:]
    if name == "profile":
        path = tmp_path / "profile.json"
        path.write_text(json.dumps({"format": "simdist-calibration/1", "compute": [
            {"gpu": "v100-sxm2-32gb", "dtype": "fp16", "efficiency": 0.3}]}))
    else:
        path = tmp_path / f"{name}.graphml"
        path.write_text(GRAPHML.replace("CORE", "400 Gb/s" if name == "fast" else "1 Gb/s"))
    return str(path)


def _resolve(tmp_path, changes: dict) -> dict:
    changes = copy.deepcopy(changes)  # run_with inserts values by reference
    out = {}
    for k, v in changes.items():
        if isinstance(v, dict):
            v = {kk: _files(tmp_path, vv) for kk, vv in v.items()}
        out[k] = _files(tmp_path, v)
    return out


@pytest.mark.parametrize("key", sorted(CASES))
def test_key_changes_the_result_or_is_refused(key, tmp_path):
    base, context, change, expected = CASES[key]
    context, change = _resolve(tmp_path, context), _resolve(tmp_path, change)
    before = result_json(run_with(base, context))
    if expected in ("changes", "same"):
        after = result_json(run_with(base, {**context, **change}))
        assert (after != before) == (expected == "changes"), f"{key}: {expected} expected"
        return
    with pytest.raises(ScenarioError) as err:
        run_with(base, {**context, **change})
    assert expected in str(err.value), f"{key}: the error should name {expected}: {err.value}"


@pytest.mark.parametrize("zero", [1, 2, 3, "fsdp"])
def test_zero_changes_a_model_parallel_result(zero):
    """training.parallelism.zero with tp and pp (dp 2 x tp 2 x pp 2) changes the time and the memory."""
    mp = {**MP, "training.parallelism": {"tp": 2, "pp": 2, "zero": zero}}
    base, other = run_with(TRAIN, MP), run_with(TRAIN, mp)
    assert other.iteration_time_s != base.iteration_time_s
    assert other.memory.parts_bytes != base.memory.parts_bytes


def test_tp_comm_overlap_changes_the_iteration_time():
    ctx = {**MP, "training.sequence_parallel": True}
    assert run_with(TRAIN, {**ctx, "training.tp_comm_overlap": True}).iteration_time_s != \
        run_with(TRAIN, ctx).iteration_time_s
