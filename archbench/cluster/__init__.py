"""An emulated multi-node cluster on one Linux machine.

Every node is a network namespace (`node1`, `node2`, ...) with its own address, hostname and
sshd, joined to a bridge on the host by a veth link whose bandwidth is shaped with `tc tbf` in
both directions. `mpirun --hostfile` and `horovodrun -H node1,node2` then start ranks inside the
namespaces over ssh, exactly as on a real cluster.
"""
