"""`archbench info`: the versions of the engines and what Horovod was built with."""

from __future__ import annotations

import json
import os


def collect() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # deferred: the record's environment (subprocess, platform) is read only when info runs
    from archbench.runtime.environment import environment

    info = {"environment": environment()}
    try:
        # deferred: `archbench info` reports a missing TensorFlow instead of failing
        import tensorflow as tf

        info["tensorflow"] = {
            "version": tf.__version__,
            "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
        }
    except ImportError as exc:
        info["tensorflow"] = {"error": str(exc)}
    try:
        # deferred: `archbench info` reports a missing Horovod instead of failing
        import horovod
        import horovod.tensorflow as hvd

        info["horovod"] = {
            "version": horovod.__version__,
            "controllers": [
                name
                for name, built in (("mpi", hvd.mpi_built()), ("gloo", hvd.gloo_built()))
                if built
            ],
            "tensor_operations": [
                name
                for name, built in (
                    ("nccl", hvd.nccl_built()),
                    ("ddl", hvd.ddl_built()),
                    ("ccl", hvd.ccl_built()),
                )
                if built
            ]
            or ["cpu (mpi/gloo)"],
        }
    except ImportError as exc:
        info["horovod"] = {"error": str(exc)}
    try:
        # deferred: `archbench info` reports a missing mpi4py instead of failing
        import mpi4py

        info["mpi4py"] = {
            "version": mpi4py.__version__,
            "mpi_config": {k: str(v) for k, v in mpi4py.get_config().items()},
        }
    except ImportError as exc:
        info["mpi4py"] = {"error": str(exc)}
    return info


def run(args) -> int:
    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    env = info["environment"]
    horovod = info["horovod"]
    shown = {"tensorflow-cpu", "tensorflow", "horovod", "mpi4py", "numpy"}
    rows = [
        ("archbench", f"{env['archbench']} ({env['git_commit'] or 'no git'})"),
        ("python", env["python"]),
        ("tensorflow", info["tensorflow"].get("version", info["tensorflow"].get("error"))),
        ("horovod", horovod.get("version", horovod.get("error"))),
        ("horovod controllers", ", ".join(horovod.get("controllers", [])) or "-"),
        ("horovod tensor ops", ", ".join(horovod.get("tensor_operations", [])) or "-"),
        ("mpi", env["mpi"] or "not found"),
        ("mpi4py", info["mpi4py"].get("version", info["mpi4py"].get("error"))),
        ("numpy", env["numpy"]),
        *((name, version) for name, version in env["packages"].items() if name not in shown),
        ("constraints.txt", _constraints_line(env["constraints"])),
        ("cpu", env["cpu"]),
        ("gpu", ", ".join(info["tensorflow"].get("gpus", [])) or "none"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


def _constraints_line(constraints: dict | None) -> str:
    """Whether the installed stack is the pinned one."""
    if constraints is None:
        return "not found (no pinned stack to compare with)"
    if not constraints["differs"]:
        return f"all {constraints['pinned']} pinned versions installed ({constraints['sha256']})"
    return f"{len(constraints['differs'])} differ: " + "; ".join(constraints["differs"])


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "info", help="versions of TensorFlow, Horovod (and its controllers), MPI, mpi4py"
    )
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.set_defaults(func=run)
