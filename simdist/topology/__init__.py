"""Topology builders (graphs of nodes, switches and links: topology.plain.LinkGraph) and routing with ECMP."""
