"""Parameter-server plumbing: cluster layout, variable sharding, the worker graph, life cycle."""
