"""The iteration as an execution graph: tasks on streams with dependencies, per class of identical ranks."""
