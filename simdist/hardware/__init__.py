"""Hardware specs (GPUs, links, nodes, fabrics) as frozen dataclasses; catalog data lives in data/*.yaml."""
