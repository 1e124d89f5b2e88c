"""Gradient compression codecs: wire bytes, encode/decode cost, in-network summability."""
