"""The engine: wires a scenario's topology, network model and workload into one simulation."""
