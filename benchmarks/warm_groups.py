"""Warm groups vs one launch per run: the same study swept both ways in one session.

    python benchmarks/warm_groups.py runs/tiny.yaml [--cluster emulated] [--out DIR]

The spec is copied twice into DIR (its study renamed `<study>-warm` and `<study>-cold`), swept
warm (the default) and then with `--cold`, and for each this prints the study's wall time, its
training time (the runs' `timing.train_s`, real seconds), the training share, and the per-run
overhead: run wall (the driver's, from the launch or the previous run's end to the run's record)
minus training minus evaluation. Then, per configuration, the median step warm and cold (the
median over repetitions of each run's median step) with the repetitions' spread (min..max), and
whether the warm and cold runs ended with the same statuses and, for synchronous runs, the same
parameters (`result.param_digest_per_rank`). Last, where the runs' wall went, phase by phase
(`launch.phases_s`: start-up, warm-up, training, probes, evaluation, the end).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from archbench.record.io import read_records
from archbench.runtime.phases import PHASES
from archbench.sweep.records import real_seconds

HIDDEN = ("seed",)  # differs between repetitions of one configuration


def copy_spec(spec: Path, folder: Path, suffix: str, cluster: dict[str, str]) -> Path:
    """The spec, its study renamed `<study>-<suffix>`, its cluster section updated."""
    raw = yaml.safe_load(spec.read_text())
    raw["study"] = f"{raw.get('study') or spec.stem}-{suffix}"
    if cluster:
        raw["cluster"] = {**(raw.get("cluster") or {}), **cluster}
    target = folder / f"{raw['study']}.yaml"
    target.write_text(yaml.safe_dump(raw, sort_keys=False))
    return target


def sweep(spec: Path, extra: list[str]) -> float:
    """Runs the study; its wall time in seconds."""
    started = time.monotonic()
    command = [sys.executable, "-m", "archbench.cli", "sweep", str(spec), *extra]
    code = subprocess.run(command, check=False).returncode
    if code not in (0, 1):
        raise SystemExit(f"warm_groups: {' '.join(command)} exited with status {code}")
    return time.monotonic() - started


def records_of(spec: Path) -> dict[str, dict[str, Any]]:
    study = yaml.safe_load(spec.read_text())["study"]
    path = spec.parent / study / "results.jsonl"
    return {record["run_id"]: record for record in read_records(str(path))}


def overhead_s(record: dict[str, Any]) -> float:
    wall = float(record["sweep"]["driver_wall_s"])
    return wall - real_seconds(record, "train_s") - real_seconds(record, "eval_s")


def summary(name: str, wall: float, records: dict[str, dict[str, Any]]) -> dict[str, float]:
    trained = sum(real_seconds(r, "train_s") for r in records.values())
    overheads = [overhead_s(r) for r in records.values()]
    launches = len({r["sweep"].get("warm_group") or r["run_id"] for r in records.values()})
    line = (
        f"{name}: {len(records)} runs in {launches} launches; study wall {wall:.1f} s, training "
        f"{trained:.1f} s ({100 * trained / wall:.1f}% of wall); per-run overhead median "
        f"{statistics.median(overheads):.2f} s, mean {statistics.mean(overheads):.2f} s"
    )
    print(line)
    return {
        "wall": wall,
        "overhead_median": statistics.median(overheads),
        "overhead_mean": statistics.mean(overheads),
    }


def phase_table(warm: dict[str, dict], cold: dict[str, dict]) -> None:
    """Where the runs' wall went (the records' `launch.phases_s`, real seconds): the mean per
    run of each phase, warm and cold; `outside the rank` is the driver's wall less the phases
    (the launcher and ssh, process start and exit, the driver's own work between runs)."""
    print("\nwhere a run's wall goes, mean seconds per run (real): warm vs cold")
    rows: dict[str, dict[str, float]] = {}
    for label, records in (("warm", warm), ("cold", cold)):
        timed = [r for r in records.values() if (r.get("launch") or {}).get("phases_s")]
        for name in PHASES:
            rows.setdefault(name, {})[label] = (
                statistics.mean(r["launch"]["phases_s"][name] for r in timed) if timed else 0.0
            )
        rows.setdefault("outside the rank", {})[label] = (
            statistics.mean(
                float(r["sweep"]["driver_wall_s"]) - sum(r["launch"]["phases_s"].values())
                for r in timed
            )
            if timed
            else 0.0
        )
    for name, values in rows.items():
        print(f"  {name:17} {values['warm']:7.2f} {values['cold']:7.2f}")


def configuration(record: dict[str, Any]) -> str:
    config = {k: v for k, v in record["sweep"]["config"].items() if k not in HIDDEN}
    return json.dumps(config, sort_keys=True, default=str)


def step_table(warm: dict[str, dict], cold: dict[str, dict]) -> int:
    """Per configuration: median steps warm vs cold; the configurations whose warm median lies
    outside the cold repetitions' spread (and the cold one outside the warm spread)."""
    by_config: dict[str, dict[str, list[float]]] = {}
    for label, records in (("warm", warm), ("cold", cold)):
        for record in records.values():
            step = (record.get("timing") or {}).get("step_s_median")
            if record["status"] == "ok" and step:
                by_config.setdefault(configuration(record), {"warm": [], "cold": []})
                by_config[configuration(record)][label].append(1000 * step)
    outside = 0
    print("\nmedian step per configuration, ms: warm [min..max] vs cold [min..max]")
    for key, steps in sorted(by_config.items()):
        config = json.loads(key)
        shown = " ".join(
            f"{k}={config[k]}" for k in ("arch", "model", "workers", "num_ps", "placement",
                                         "bandwidth", "lr", "batch_size") if k in config
        )  # fmt: skip
        if not steps["warm"] or not steps["cold"]:
            print(f"  {shown}: not measured both ways")
            continue
        w, c = steps["warm"], steps["cold"]
        overlap = min(w) <= max(c) and min(c) <= max(w)
        outside += not overlap
        print(
            f"  {shown}: {statistics.median(w):.2f} [{min(w):.2f}..{max(w):.2f}] vs "
            f"{statistics.median(c):.2f} [{min(c):.2f}..{max(c):.2f}]"
            + ("" if overlap else "  <- spreads do not overlap")
        )
    return outside


def same_outcomes(warm: dict[str, dict], cold: dict[str, dict]) -> None:
    statuses = sum(
        1 for run_id in warm if cold.get(run_id, {}).get("status") == warm[run_id]["status"]
    )
    synchronous = [
        run_id
        for run_id, record in warm.items()
        if run_id in cold
        and record["status"] == "ok"
        and record["config"].get("sync") in (True, "sync")
        and record["config"]["arch"] in ("ring", "p2p", "ps", "single")
    ]
    same = sum(
        1
        for run_id in synchronous
        if warm[run_id]["result"]["param_digest_per_rank"]
        == cold[run_id]["result"]["param_digest_per_rank"]
    )
    print(
        f"\nsame status warm and cold: {statuses} of {len(warm)} runs; same final parameters "
        f"(bit for bit): {same} of {len(synchronous)} synchronous runs"
    )
    differing: dict[str, list[int]] = {}
    for run_id in synchronous:
        if (
            warm[run_id]["result"]["param_digest_per_rank"]
            != (cold[run_id]["result"]["param_digest_per_rank"])
        ):
            config = warm[run_id]["config"]
            key = f"{config['arch']} {config.get('model')} W={config.get('workers')}"
            differing.setdefault(key, []).append((warm[run_id].get("launch") or {}).get("position"))
    for key, positions in sorted(differing.items()):
        # a difference at position 1 (a launch's first run, which inherits nothing) is the
        # configuration's own run-to-run variation (a sum whose order follows arrival), not
        # something a warm launch carried over
        print(f"  differ: {key}, at warm launch position(s) {sorted(positions)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="benchmarks/warm_groups.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("spec", type=Path, help="a study spec, e.g. runs/tiny.yaml")
    parser.add_argument(
        "--out", type=Path, help="where the two studies go (default: a new temporary folder)"
    )
    parser.add_argument("--cluster", help="passed to archbench sweep --cluster")
    parser.add_argument(
        "--cluster-name",
        help="the emulated cluster's name in both copies (with --node-prefix: its node names), "
        "so that the benchmark never touches another cluster that is up",
    )
    parser.add_argument("--node-prefix", help="the emulated cluster's node name prefix")
    args = parser.parse_args(argv)
    folder = args.out or Path(tempfile.mkdtemp(prefix="warm-groups-"))
    folder.mkdir(parents=True, exist_ok=True)
    extra = ["--cluster", args.cluster] if args.cluster else []
    cluster = {"name": args.cluster_name, "prefix": args.node_prefix}
    cluster = {key: value for key, value in cluster.items() if value}
    warm_spec = copy_spec(args.spec, folder, "warm", cluster)
    cold_spec = copy_spec(args.spec, folder, "cold", cluster)
    warm_wall = sweep(warm_spec, extra)
    cold_wall = sweep(cold_spec, [*extra, "--cold"])
    warm, cold = records_of(warm_spec), records_of(cold_spec)
    print(f"\n{args.spec}: swept warm, then cold, in {folder}")
    w = summary("warm", warm_wall, warm)
    c = summary("cold", cold_wall, cold)
    print(
        f"warm/cold: study wall {w['wall'] / c['wall']:.2f}x ({c['wall'] / w['wall']:.1f}x faster "
        f"warm), per-run overhead {w['overhead_median'] / c['overhead_median']:.2f}x (median), "
        f"{w['overhead_mean'] / c['overhead_mean']:.2f}x (mean)"
    )
    phase_table(warm, cold)
    outside = step_table(warm, cold)
    print(f"configurations whose warm and cold step spreads do not overlap: {outside}")
    same_outcomes(warm, cold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
