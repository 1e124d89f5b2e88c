"""Validation harness: an emulated cluster (namespaces, bridges, tc tbf) and torch.distributed workers.

Runs the communication patterns simdist models for real and records barrier-aligned timings, so that
predictions can be compared with measurements. Only validation/ imports torch; it uses simdist's
public API only.
"""
