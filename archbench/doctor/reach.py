"""Each host answers ssh without a password: mpirun starts its daemons and horovodrun its task
servers that way, so a host that asks for a password or does not answer fails every run."""

from __future__ import annotations

from collections.abc import Sequence

from archbench.doctor.problems import Problem
from archbench.doctor.remote import CONNECT_TIMEOUT_S, Reply, run_on_hosts

ANSWER = "archbench-doctor-reached"
# ssh's own time to connect, plus a login on a busy host
TIMEOUT_S = CONNECT_TIMEOUT_S + 20.0

# (what ssh says, what it means, what to do); {host} is the host's name
_SSH_ERRORS = (
    ("could not resolve hostname", "its name does not resolve",
     "add it to /etc/hosts or DNS, or correct the hostfile"),
    ("connection refused", "nothing accepts ssh on port 22 (sshd stopped?)",
     "start sshd on {host} (systemctl start ssh)"),
    ("no route to host", "no route to it (host down or on another network)",
     "power {host} on or check its network"),
    ("timed out", f"no answer to ssh within {CONNECT_TIMEOUT_S} s",
     "check that {host} is up and that a firewall lets port 22 through"),
    ("host key verification failed", "its host key is not known here",
     "run `ssh {host}` once and accept the key (mpirun cannot answer that prompt)"),
    ("permission denied", "ssh asks for a password",
     "install a key without passphrase there (ssh-copy-id {host}) or load yours into ssh-agent"),
)  # fmt: skip


def ssh_problem(host: str, reply: Reply) -> Problem | None:
    """What kept `host` from answering, or None when it answered."""
    if reply.ok and ANSWER in reply.stdout:
        return None
    if reply.status is None:
        return Problem(host, f"ssh did not finish within {TIMEOUT_S:g} s",
                       f"check that {host} is up and its sshd answers")  # fmt: skip
    said = " ".join(reply.stderr.split())
    for needle, what, fix in _SSH_ERRORS:
        if needle in said.lower():
            return Problem(host, f"ssh: {what}", fix.format(host=host))
    last = reply.stderr.strip().splitlines()[-1:] or [f"status {reply.status}"]
    return Problem(
        host,
        f"ssh {host} true failed ({last[0]})",
        f"make `ssh {host} true` work without a password",
    )


def unreachable(hosts: Sequence[str]) -> list[Problem]:
    """One problem per host that ssh cannot reach without a password (this host is not asked)."""
    replies = run_on_hosts(hosts, lambda _: ["echo", ANSWER], TIMEOUT_S)
    return [problem for host in hosts if (problem := ssh_problem(host, replies[host]))]
