"""archbench's ring step vs a bare Horovod loop, same model/batch/world, one run.

Usage: python benchmarks/ring_overhead.py [--model cnn] [--np 2] [--gloo] ...
(the same as `archbench bench ring-overhead ...`).
"""

import sys

from archbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "ring-overhead", *sys.argv[1:]]))
