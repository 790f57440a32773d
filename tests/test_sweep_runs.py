"""Real sweeps: real training processes under real launchers, faults, and a driver killed mid-study."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from record_files import read_records

from archbench.record import missing_keys

REPO = Path(__file__).resolve().parents[1]
FASHION = "/usr/share/datasets/fashion-mnist"


def sweep_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def sweep(
    spec: Path, *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`archbench sweep` as a user runs it; `env` adds variables to the sweep's environment."""
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec), *args],
        cwd=REPO, env={**sweep_env(), **(env or {})}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def write_spec(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def results(folder: Path) -> list[dict]:
    return read_records(folder / "results.jsonl")


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (a study's folder)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in cmdline and state != "Z":
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry}: {words}")
    return found


@pytest.fixture
def no_leftovers(tmp_path):
    """Fails the test if any process of its studies is still alive at the end (and kills it)."""
    yield
    deadline = time.monotonic() + 10
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_mentioning(str(tmp_path))
    for line in left:
        os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert not left, "processes outlived the sweep:\n" + "\n".join(left)


def copy_spec(name: str, folder: Path) -> Path:
    """A checked-in study spec, copied so its results go to the test's folder."""
    target = folder / f"{name}.yaml"
    target.write_text((REPO / "runs" / f"{name}.yaml").read_text())
    return target


def test_the_tiny_2x2_study_with_2_repetitions_gives_8_records_and_resumes_to_nothing(
    tmp_path, no_leftovers
):
    spec = copy_spec("tiny", tmp_path)  # 2x2 full factorial, 2 repetitions
    study = tmp_path / "tiny"

    dry = sweep(spec, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    commands = dry.stdout.splitlines()
    assert len(commands) == 8
    assert all("-m archbench.train --arch single" in c for c in commands)
    assert len({c.split("--run-id ")[1].split()[0] for c in commands}) == 8
    assert not study.exists(), "--dry-run must write nothing"

    first = sweep(spec)
    assert first.returncode == 0, first.stderr
    records = results(study)
    assert len(records) == 8
    assert len({r["run_id"] for r in records}) == 8
    assert [r["status"] for r in records] == ["ok"] * 8, [r.get("error") for r in records]
    for r in records:
        assert missing_keys(r) == [], missing_keys(r)
        assert r["study"] == "tiny"
        assert r["config"]["lr"] == r["sweep"]["factors"]["lr"]
        assert r["config"]["momentum"] == r["sweep"]["factors"]["momentum"]
        assert Path(r["sweep"]["log"]).exists()
    combos = sorted(
        (r["config"]["lr"], r["config"]["momentum"], r["sweep"]["repetition"]) for r in records
    )
    assert combos == sorted(
        (lr, m, rep) for lr in (0.02, 0.05) for m in (0.0, 0.9) for rep in (1, 2)
    )
    # the two repetitions train from different seeds
    assert len({r["config"]["seed"] for r in records}) == 2
    # progress: plain lines on a non-terminal, with counts and an ETA
    assert "[8/8] ok" in first.stderr and "ETA" in first.stderr
    # commands are the ones --dry-run printed (same ids, same order)
    started = [
        line.split("start ")[1].split()[0]
        for line in first.stderr.splitlines()
        if "] start " in line
    ]
    assert started == [c.split("--run-id ")[1].split()[0] for c in commands]

    before = (study / "results.jsonl").read_bytes()
    again = sweep(spec)
    assert again.returncode == 0, again.stderr
    assert "0 to run" in again.stderr and "start" not in again.stderr
    assert (study / "results.jsonl").read_bytes() == before
    assert sweep(spec, "--dry-run").stdout == ""


FAULTS = """
    study: faults
    order: design
    timeout_s: 180
    timeouts:
      - when: {steps: 1000000}
        timeout_s: 20
    cluster: {kind: localhost, slots: 2}
    fixed:
      synthetic_shape: 4x4
      data_dir: %(corrupt)s
      batch_size: 16
      eval_samples: 200
    factors:
      arch: [ring, single]
      dataset: [synthetic, fashion_mnist]
      model: [mlp, cnn]
      steps: [20, 1000000]
    design:
      one_at_a_time:
        base: {arch: ring, dataset: synthetic, model: mlp, steps: 20}
    """


def corrupt_fashion_mnist(folder: Path) -> Path:
    """Fashion-MNIST files damaged inside their compressed data, their headers and sizes intact:
    the up-front check passes, and reading them crashes the run."""
    folder.mkdir()
    for source in Path(FASHION).glob("*.gz"):
        data = bytearray(source.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(64)
        (folder / source.name).write_bytes(bytes(data))
    return folder


def test_a_crash_a_hang_and_an_impossible_run_do_not_stop_the_study(tmp_path, no_leftovers):
    corrupt = corrupt_fashion_mnist(tmp_path / "corrupt")
    spec = write_spec(tmp_path, "faults", FAULTS % {"corrupt": corrupt})
    study = tmp_path / "faults"
    proc = sweep(spec)
    assert proc.returncode == 0, proc.stderr
    records = results(study)
    assert len(records) == 5 and len({r["run_id"] for r in records}) == 5, proc.stderr

    def only(**want):
        (match,) = [
            r for r in records if all(r["sweep"]["config"].get(k) == v for k, v in want.items())
        ]
        return match

    good_ring = only(arch="ring", dataset="synthetic", model="mlp", steps=20)
    good_single = only(arch="single")
    crash = only(dataset="fashion_mnist")
    impossible = only(model="cnn")
    hang = only(steps=1000000)

    assert good_ring["status"] == "ok" and good_ring["cluster"]["world_size"] == 2
    assert good_single["status"] == "ok"

    assert crash["status"] == "failed"
    assert crash["error"]["type"] == "DamagedDataFile"
    assert "damaged while reading it" in crash["error"]["message"]
    assert crash["sweep"]["exit_status"] != 0

    assert impossible["status"] == "failed"
    assert impossible["error"]["type"] == "InvalidConfiguration"
    assert "cnn needs image inputs" in impossible["error"]["message"]

    assert hang["status"] == "timeout"
    assert hang["error"]["type"] == "Timeout"
    assert hang["sweep"]["timed_out"] is True
    assert 20 <= hang["sweep"]["driver_wall_s"] < 60

    for bad in (crash, impossible, hang):
        assert missing_keys(bad) == [], missing_keys(bad)
        assert "log_tail" in bad["error"]
        # none of them is a launcher that could not start: each ran once
        assert bad["sweep"]["attempt"] == 1 and bad["sweep"]["launch_failures"] == []
    # what the failed runs printed comes with their records (a hang may have printed nothing)
    assert "damaged while reading it" in crash["error"]["log_tail"]
    assert "cnn needs image inputs" in impossible["error"]["log_tail"]
    assert "--retry-failed" in proc.stderr
    assert processes_mentioning(str(study)) == []

    # A second sweep keeps the failed records; --retry-failed would run exactly the bad ones.
    again = sweep(spec)
    assert "0 to run" in again.stderr and len(results(study)) == 5
    retry = sweep(spec, "--retry-failed", "--dry-run")
    assert sorted(
        line.split("--run-id ")[1].split()[0] for line in retry.stdout.splitlines()
    ) == sorted(r["run_id"] for r in (crash, impossible, hang))


def test_retry_failed_replaces_the_failed_record(tmp_path, no_leftovers):
    spec = write_spec(
        tmp_path,
        "retry",
        """
        cluster: localhost
        fixed: {arch: single, model: cnn, dataset: synthetic, synthetic_shape: 4x4, steps: 6}
        """,
    )
    assert sweep(spec).returncode == 0
    (first,) = results(tmp_path / "retry")
    assert first["status"] == "failed" and first["sweep"]["attempt"] == 1
    assert "0 to run" in sweep(spec).stderr
    assert sweep(spec, "--retry-failed").returncode == 0
    (second,) = results(tmp_path / "retry")
    assert second["run_id"] == first["run_id"] and second["sweep"]["attempt"] == 2
    assert second["started_at"] != first["started_at"]
    strict = sweep(spec, "--strict")
    assert strict.returncode == 1  # --strict: not every run is ok


# A host the launcher must reach over ssh: a loopback address that is not this host's, so mpirun
# starts a daemon there through ssh (real ssh, on the port given with plm_rsh_args).
REMOTE_HOST = "127.0.0.2"


@contextlib.contextmanager
def dropping_sshd() -> Iterator[tuple[int, list[int]]]:
    """A port on REMOTE_HOST that accepts every connection and closes it at once, as an sshd at
    its MaxStartups limit does: ssh then fails with kex_exchange_identification. Yields the port
    and a list that counts the connections."""
    server = socket.socket()
    server.bind((REMOTE_HOST, 0))
    server.listen(16)
    server.settimeout(0.2)
    connections: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                client, _ = server.accept()
                connections.append(1)
                client.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], connections
    finally:
        stop.set()
        thread.join()
        server.close()


def launch_spec(tmp_path: Path, name: str, retries: int) -> Path:
    """A two-rank ring run with its second rank on REMOTE_HOST. How mpirun reaches it (its
    remote shell) is the sweep's environment's to say (OMPI_MCA_plm_rsh_*): a spec may not."""
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text(f"localhost slots=1\n{REMOTE_HOST} slots=1\n")
    return write_spec(
        tmp_path,
        name,
        f"""
        timeout_s: 120
        launch_retries: {retries}
        cluster: {{kind: localhost, slots: 2}}
        fixed: {{arch: ring, model: mlp, dataset: synthetic, steps: 6, batch_size: 16,
                 eval_samples: 100, placement: {hostfile}}}
        """,
    )


def test_a_run_whose_launcher_never_starts_is_tried_launch_retries_times_more(
    tmp_path, no_leftovers
):
    with dropping_sshd() as (port, connections):
        spec = launch_spec(tmp_path, "nodaemons", 2)
        proc = sweep(spec, env={"OMPI_MCA_plm_rsh_args": f"-p {port} -o BatchMode=yes"})
    assert proc.returncode == 0, proc.stderr
    (record,) = results(tmp_path / "nodaemons")
    assert record["status"] == "failed" and record["error"]["type"] == "LaunchFailed"
    assert "ORTE was unable to reliably start" in record["error"]["log_tail"]
    assert record["sweep"]["attempt"] == 3  # the first try and 2 retries
    reason = "ssh connection dropped during the handshake"
    assert record["sweep"]["launch_failures"] == [
        {"attempt": 1, "reason": reason},
        {"attempt": 2, "reason": reason},
    ]
    assert len(connections) == 3  # mpirun really tried ssh each time
    retries = [line for line in proc.stderr.splitlines() if "] retry " in line]
    assert len(retries) == 2 and f"failed to launch ({reason})" in retries[0], proc.stderr
    assert "attempt 3 after 2 launch retries" in proc.stderr


def test_a_run_whose_launcher_starts_on_the_second_try_is_recorded_ok(tmp_path, no_leftovers):
    # The remote shell mpirun uses: the first call is real ssh to the dropping port; later calls
    # run the daemon's command on this machine, as ssh to a healthy node would run it there.
    first_call = tmp_path / "first-call-done"
    with dropping_sshd() as (port, connections):
        agent = tmp_path / "remote-shell"
        agent.write_text(
            "#!/bin/sh\n"
            f"if [ ! -e {first_call} ]; then\n"
            f"  touch {first_call}\n"
            f"  exec ssh -p {port} -o BatchMode=yes {REMOTE_HOST} true\n"
            "fi\n"
            "shift\n"
            'exec sh -c "$*"\n'
        )
        agent.chmod(0o755)
        spec = launch_spec(tmp_path, "secondtry", 2)
        proc = sweep(spec, env={"OMPI_MCA_plm_rsh_agent": str(agent)})
    assert proc.returncode == 0, proc.stderr
    (record,) = results(tmp_path / "secondtry")
    assert record["status"] == "ok", record.get("error")
    assert record["cluster"]["world_size"] == 2 and record["result"]["final_loss"] is not None
    assert record["sweep"]["attempt"] == 2
    assert record["sweep"]["launch_failures"] == [
        {"attempt": 1, "reason": "ssh connection dropped during the handshake"}
    ]
    assert len(connections) == 1
    assert "] retry " in proc.stderr and "attempt 2 after 1 launch retry" in proc.stderr
    # the log is the successful try's
    assert "kex_exchange_identification" not in Path(record["sweep"]["log"]).read_text()


KILLED = """
    study: killed
    order: design
    warm: false  # one launch per run (a warm group's resume: test_warm_groups.py)
    timeout_s: 180
    cluster: {kind: localhost, slots: 2}
    fixed: {arch: single, model: mlp, dataset: fashion_mnist, steps: 20, batch_size: 32, eval_samples: 500}
    factors:
      lr: [0.01, 0.02, 0.03, 0.04]
    """


def kill_driver_then_resume(
    spec: Path, study: Path, log_path: Path, under_way: Callable[[], bool], lrs: list[float]
) -> list[dict]:
    """Starts the sweep, SIGKILLs its driver once `under_way()` (a run recorded, the next one
    running), checks that the run under way died with it, resumes, and checks that nothing was
    lost or run twice: one ok record per level of `lrs`, every record kept before the kill still
    there byte for byte, exactly once. The resumed study's records."""
    with open(log_path, "wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
            cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if under_way():
                break
            assert driver.poll() is None, log_path.read_text()
            time.sleep(0.05)
        else:
            pytest.fail("the sweep never got to its second run")
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    recorded_before = (study / "results.jsonl").read_bytes()
    # The run under way dies with its driver (it cannot go on to write anything later).
    deadline = time.monotonic() + 15
    while processes_mentioning(str(study)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(study)) == []

    resumed = sweep(spec)
    assert resumed.returncode == 0, resumed.stderr
    records = results(study)
    assert len(records) == len(lrs) and len({r["run_id"] for r in records}) == len(lrs)
    assert sorted(r["config"]["lr"] for r in records) == sorted(lrs)
    assert all(r["status"] == "ok" for r in records), [r.get("error") for r in records]
    after = (study / "results.jsonl").read_bytes()
    assert after.startswith(recorded_before)
    for line in recorded_before.splitlines():
        assert after.count(line) == 1
    return records


def test_a_driver_killed_mid_study_loses_and_duplicates_nothing(tmp_path, no_leftovers):
    spec = write_spec(tmp_path, "killed", KILLED)
    study = tmp_path / "killed"

    def under_way() -> bool:
        running = [
            d for d in (study / "runs").glob("*")
            if (d / "log.txt").exists() and not (d / "outcome.json").exists()
        ] if (study / "runs").exists() else []  # fmt: skip
        return (
            len(results(study)) >= 1
            and bool(running)
            and bool(processes_mentioning(str(running[0])))
        )

    kill_driver_then_resume(
        spec, study, tmp_path / "driver.log", under_way, [0.01, 0.02, 0.03, 0.04]
    )


def test_the_demo_study_covers_every_architecture_and_each_placement(tmp_path):
    spec = copy_spec("demo", tmp_path)
    local = sweep(spec, "--dry-run", "--cluster", "localhost")
    assert local.returncode == 0, local.stderr
    # one host: PS placement means nothing there, so (1 single + 2 ring + 2 p2p + 2 ps) x 3
    # repetitions, and the also: blocks: (ring, p2p, ps traced + single) x 2 on the cnn, async
    # ps x 3, fp16 ring x 3, and each architecture with one worker x 3 (the fidelity verdict's
    # baselines; one host's single is the one the design already runs)
    assert len(local.stdout.splitlines()) == 21 + 8 + 3 + 3 + 9
    from archbench.sweep.kinds import emulation_unavailable

    if emulation_unavailable():
        pytest.skip(emulation_unavailable())
    emulated = sweep(spec, "--dry-run", "--cluster", "emulated")
    assert emulated.returncode == 0, emulated.stderr
    commands = [line for line in emulated.stdout.splitlines() if not line.startswith("#")]
    # (1 single + 2 ring + 2 p2p + 5 ps) x 3 repetitions: single alone, whatever W; ps on a
    # dedicated host, beside a worker, and (2 workers only, within a host's 4 virtual cores)
    # every process on one host; and the also: blocks, the last one each architecture with one
    # worker (single's is the one the design already runs)
    assert len(commands) == 30 + 8 + 3 + 3 + 9
    assert not any("--companions" in command for command in commands)
    alone = [c for c in commands if "-np 1 " in c and "--companions" not in c]
    assert {
        arch for arch in ("single", "ring", "p2p") if any(f"--arch {arch} " in c for c in alone)
    } == {"single", "ring", "p2p"}
    traced = [command for command in commands if "--timeline-file" in command]
    assert len(traced) == 6 and all("--model cnn" in command for command in traced)
    for words in (
        "--model cnn",
        "--async",
        "--compression fp16",
        "--arch single",
        "--arch ring",
        "--arch p2p",
        "--arch ps",
        "--model mlp",
        "--sync",
        "-np 2 ",
        "-np 4 ",
        "-np 3 ",
        "-np 5 ",
    ):
        assert any(words in command for command in commands), words
    assert not (tmp_path / "demo").exists()


def test_a_bandwidth_factor_runs_in_one_block_per_bandwidth(tmp_path):
    from archbench.sweep.kinds import emulation_unavailable

    if emulation_unavailable():
        pytest.skip(emulation_unavailable())
    spec = write_spec(
        tmp_path,
        "links",
        """
        cluster: {kind: emulated, nodes: 2, name: sweepblocks, prefix: swb}
        fixed: {steps: 6}
        factors:
          arch: [single, ring]
          lr: [0.1, 0.2, 0.3]
          bandwidth: [10mbit, 100mbit, 1gbit]
        """,
    )
    dry = sweep(spec, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    blocks = [line.split(" at ")[1].split()[0] for line in lines if line.startswith("#")]
    assert sorted(blocks) == [
        "100mbit",
        "10mbit",
        "1gbit",
    ]  # each bandwidth once: one re-shape each
    assert (
        len([line for line in lines if not line.startswith("#")]) == 3 + 9
    )  # single ignores links
