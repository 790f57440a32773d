"""The `archbench` console script: a thin dispatcher over one module per subcommand.

Each subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func` (called with the parsed namespace, returning an exit status). Modules are imported only
when their command runs, so `archbench --help` and bad input stay fast (no TensorFlow import).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from archbench.common.errors import StopError, UsageError
from archbench.common.safe_text import shown
from archbench.runtime.one_line_parser import OneLineArgumentParser

# subcommand -> module that registers it
SUBCOMMANDS: dict[str, str] = {
    "train": "archbench.train",
    "info": "archbench.info",
    "bench": "archbench.bench",
    "cluster": "archbench.cluster.cli",
    "sweep": "archbench.sweep.cli",
    "submit": "archbench.sweep.submit",
    "doctor": "archbench.doctor.cli",
    "init": "archbench.init.cli",
    "report": "archbench.analysis.cli",
    "compare": "archbench.analysis.compare",
    "timeline": "archbench.analysis.trace_cli",
    "microbench": "archbench.perfmodel.measure.microbench",
    "predict": "archbench.perfmodel.model.cli_predict",
    "model": "archbench.perfmodel.fit.cli_model",
    "optimize": "archbench.perfmodel.optimize.cli_optimize",
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="archbench", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=OneLineArgumentParser
    )
    subparsers.required = True
    wanted = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    for name, module_name in SUBCOMMANDS.items():
        if wanted is not None and name != wanted:
            # Only the chosen command's module is imported; the others get a bare entry for --help.
            subparsers.add_parser(name)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if wanted is None and exc.name and exc.name.startswith(module_name.split(".")[0]):
                subparsers.add_parser(name, help="(not available in this build)")
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so a reader gone early is caught below, not at exit
        return status
    except BrokenPipeError:
        # the reader stopped reading (`| head`): no traceback; stdout to /dev/null, so the
        # interpreter's last flush at exit has nowhere to fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE
    except UsageError as exc:
        print(f"archbench {args.command}: error: {shown(str(exc))}", file=sys.stderr)
        return UsageError.exit_code
    except StopError as exc:
        print(f"archbench {args.command}: error: {shown(str(exc))}", file=sys.stderr)
        return StopError.exit_code
    except KeyboardInterrupt:
        print(f"archbench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
