"""Topology builders (networkx graphs of nodes, switches and links) and routing with ECMP."""
