"""`archbench init`: a starter study spec for the hosts at hand (a hostfile, the Slurm allocation
it runs in, or an emulated cluster), whose levels fit those hosts and whose comments say what to
change."""
