"""One training run, as every rank runs it: its configuration and settings, who it is in the job,
the training loop, the probes and phases it times, the exchanges' shared pieces, and the one door
to virtual time (`emulation`)."""
