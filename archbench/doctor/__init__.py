"""`archbench doctor`: can a study run on these hosts? One module per family of checks.

- `remote`: running a command on a host (ssh without a password, or this host directly);
- `reach`: each host answers ssh in batch mode (the way mpirun and horovodrun reach it);
- `probe` (run on each host by `hostprobe`) and `versions`: the same Python, TensorFlow,
  Horovod and its controllers, MPI, mpi4py and archbench as this host;
- `dataset`: the data set's files present and readable on each host;
- `files`: a user's model file and data files the same bytes (sha256) on each host as here;
- `mpijob` (with `ranks` on each host): a trivial mpirun job across every host, and the ports a
  parameter server would listen on reachable between hosts;
- `link`: the link rate measured between pairs of hosts against the rate claimed;
- `quick`: the cheap checks (ssh, versions without TensorFlow, a user's model and data files),
  which a sweep makes first;
- `cli`: the command, its inputs (a hostfile, `-H`, a study, a Slurm allocation) and its output.

Every problem is one line naming the host and the fix (`Problem`).
"""
