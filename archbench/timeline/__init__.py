"""Timelines (`--timeline FILE`): where every traced step's time goes, for every architecture.

A run traces a few ordinary steps after its warm-up (`archbench.runtime.probes`) and writes one
Chrome Trace Event Format file (`traceformat`): a process per rank, parameter servers included,
on one clock (`clock`) in virtual time (`build`). What records the spans differs by
architecture (`capture`); what the record keeps of them (`timeline.*`) is read from the trace
itself (`breakdown`), as `archbench timeline FILE` reads it (`archbench.analysis.trace_cli`).
A run's tracer (`tracer`) makes the three calls `archbench.train` makes.

The package itself imports nothing, so that importing one of its modules does not load the
tracer (and through it the training loop).
"""
