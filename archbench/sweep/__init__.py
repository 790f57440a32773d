"""Design-of-experiments sweeps: a YAML study spec becomes real training runs and a results file.

Data flows one way: spec (load, validate) -> design (which factor levels) -> plan (normalised
configurations, run ids, order) -> commands (exact argv and hostfile) -> runner (one process tree,
killed whole on timeout) -> store (one line per finished run in results.jsonl).
"""
