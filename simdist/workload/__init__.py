"""Workloads: per-layer model profiles (ModelSpec), the model catalog, an optional torch importer."""
