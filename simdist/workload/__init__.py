"""Workloads: per-layer model profiles (ModelSpec), the model catalog, an optional torch importer."""
from simdist.workload.catalog import default_seq_len, get_model, model_keys
from simdist.workload.inline import model_from_layers
from simdist.workload.transformer import parametric_bert, parametric_gpt

__all__ = ["default_seq_len", "get_model", "model_from_layers", "model_keys", "parametric_bert", "parametric_gpt"]
