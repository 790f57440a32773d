"""The bad-input table: what a new user might type, across every command, and what each must get.

Every case runs as a real process, the way a user types it, in an empty folder of its own. Each
must end with its documented exit status (2 unless said otherwise), exactly one line on stderr
(or the documented number: one per problem), no Python traceback, and nothing written anywhere;
where the documented answer is not an error (records with impossible measurements, a garbage
line at resume), the output must say what the case names. A new setting adds its rows here.

`python tests/bad_inputs.py` runs the table outside pytest and prints the counts.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from data_files import write_cifar_like, write_idx, write_mnist_like  # noqa: E402
from record_files import minimal_record, write_records  # noqa: E402

TRAIN = [sys.executable, "-m", "archbench.train"]
CLI = [sys.executable, "-m", "archbench.cli"]
PREDICT = [*CLI, "predict", "--arch", "ring", "--workers", "2", "--model", "mlp"]
PREDICT += ["--batch-size", "32", "--compute-ms", "5"]
WHATIF = [*CLI, "model", "whatif", "--models", "mlp", "--compute-ms", "1"]


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]  # "{ws}" stands for the folder of prepared files
    status: int = 2
    lines: int = 1  # lines on stderr: one per problem
    says: str = ""  # text the output must hold (where the documented answer is not an error)


def _train(name: str, *args: str, lines: int = 1) -> Case:
    return Case(f"train {name}", [*TRAIN, *args, "--out", "{out}"], lines=lines)


def _sweep(name: str, spec: str, *args: str) -> Case:
    return Case(f"sweep {name}", [*CLI, "sweep", f"{{ws}}/specs/{spec}.yaml", *args])


TRAIN_CASES = [
    _train("unknown model", "--model", "nosuchnet"),
    _train("unknown arch", "--arch", "butterfly"),
    _train("unknown dataset", "--dataset", "imagenet"),
    _train("unknown optimizer", "--optimizer", "adamw"),
    _train("unknown compression", "--compression", "int4"),
    _train("unknown ps sharding", "--ps-sharding", "random"),
    _train("unknown p2p schedule", "--p2p-schedule", "eager"),
    _train("unknown flag", "--nosuch-flag", "1"),
    # a setting of another architecture is said, not silently dropped
    _train("servers for p2p", "--arch", "p2p", "--num-ps", "2"),
    _train("async ring", "--arch", "ring", "--async"),
    _train("fusion for single", "--arch", "single", "--fusion-threshold-mb", "8"),
    _train("batch size 0", "--batch-size", "0"),
    _train("batch size -1", "--batch-size", "-1"),
    _train("batch size text", "--batch-size", "many"),
    _train("batch size huge", "--batch-size", "2000000"),
    _train("steps 0", "--steps", "0"),
    _train("steps -3", "--steps", "-3"),
    _train("steps 1.5", "--steps", "1.5"),
    _train("steps text", "--steps", "ten"),
    _train("epochs 0", "--epochs", "0"),
    _train("epochs and steps", "--epochs", "1", "--steps", "5"),
    _train("lr 0", "--lr", "0"),
    _train("lr -1", "--lr", "-1"),
    _train("lr nan", "--lr", "nan"),
    _train("lr inf", "--lr", "inf"),
    _train("lr -inf", "--lr=-inf"),
    _train("lr text", "--lr", "fast"),
    _train("lr huge", "--lr", "1e9"),
    _train("momentum -0.1", "--momentum=-0.1"),
    _train("momentum 1", "--momentum", "1"),
    _train("momentum nan", "--momentum", "nan"),
    _train("seed -1", "--seed", "-1"),
    _train("seed 2**31", "--seed", "2147483648"),
    _train("seed text", "--seed", "lucky"),
    _train("warm-up 100 of 20 steps", "--warmup-steps", "100", "--steps", "20"),
    _train("warm-up -1", "--warmup-steps", "-1"),
    _train("probe every -1", "--probe-every", "-1"),
    _train("eval every -1", "--eval-every", "-1"),
    _train("eval samples -1", "--eval-samples", "-1"),
    _train("threads -1", "--threads", "-1"),
    _train("target accuracy 0", "--target-accuracy", "0"),
    _train("target accuracy 1.5", "--target-accuracy", "1.5"),
    _train("target accuracy nan", "--target-accuracy", "nan"),
    _train("synthetic samples 1e9", "--dataset", "synthetic", "--synthetic-samples", "1000000000"),
    _train("synthetic samples 0", "--dataset", "synthetic", "--synthetic-samples", "0"),
    _train("synthetic classes 0", "--dataset", "synthetic", "--synthetic-classes", "0"),
    _train("synthetic shape 0x3", "--dataset", "synthetic", "--synthetic-shape", "0x3"),
    _train("synthetic shape text", "--dataset", "synthetic", "--synthetic-shape", "big"),
    _train("synthetic shape huge", "--dataset", "synthetic", "--synthetic-shape", "99999x9999x3"),
    _train("seq len 0", "--dataset", "text", "--model", "charlm", "--seq-len", "0"),
    _train("fusion threshold -1", "--arch", "ring", "--fusion-threshold-mb=-1"),
    _train("fusion threshold nan", "--arch", "ring", "--fusion-threshold-mb", "nan"),
    _train("cycle time 0", "--arch", "ring", "--cycle-time-ms", "0"),
    _train("cycle time inf", "--arch", "ring", "--cycle-time-ms", "inf"),
    _train(
        "compression ratio 0", "--arch", "ring", "--compression", "topk", "--compression-ratio", "0"
    ),
    _train(
        "compression ratio 1.5",
        "--arch",
        "p2p",
        "--compression",
        "topk",
        "--compression-ratio",
        "1.5",
    ),
    _train("compression ratio nan", "--arch", "ring", "--compression-ratio", "nan"),
    _train(
        "powersgd rank 0", "--arch", "ring", "--compression", "powersgd", "--powersgd-rank", "0"
    ),
    _train("powersgd rank -2", "--arch", "ring", "--powersgd-rank=-2"),
    _train("compression warm-up -1", "--arch", "p2p", "--compression-warmup-steps=-1"),
    _train("unknown error feedback", "--arch", "ring", "--error-feedback", "maybe"),
    _train("powersgd on p2p", "--arch", "p2p", "--compression", "powersgd"),
    _train("fp16 on p2p", "--arch", "p2p", "--compression", "fp16"),
    _train("powersgd on ps", "--arch", "ps", "--compression", "powersgd"),
    _train("topk on async ps", "--arch", "ps", "--async", "--compression", "topk"),
    _train("num ps 0", "--arch", "ps", "--num-ps", "0"),
    _train("ps timeout 0", "--arch", "ps", "--ps-timeout", "0"),
    _train("ps timeout nan", "--arch", "ps", "--ps-timeout", "nan"),
    _train("ps alone", "--arch", "ps", "--num-ps", "1"),
    _train("sync and async", "--arch", "ps", "--sync", "--async"),
    _train("sync every 0", "--arch", "ring", "--sync-every", "0"),
    _train("sync every -1", "--arch", "p2p", "--sync-every=-1"),
    _train("sync every text", "--arch", "ring", "--sync-every", "often"),
    _train("sync every 1.5", "--arch", "ps", "--sync-every", "1.5"),
    _train("sync every with async ps", "--arch", "ps", "--async", "--sync-every", "4"),
    _train("sync every warm-up -1", "--arch", "ring", "--sync-every-warmup-steps=-1"),
    _train("sync every with topk", "--arch", "ring", "--sync-every", "4", "--compression", "topk"),
    _train("partition mb 0", "--arch", "p2p", "--partition-mb", "0"),
    _train("partition mb -1", "--arch", "ps", "--partition-mb=-1"),
    _train("partition mb text", "--arch", "p2p", "--partition-mb", "big"),
    _train("partition mb on ring", "--arch", "ring", "--partition-mb", "1"),
    _train("priority on ring", "--arch", "ring", "--priority", "on"),
    _train("priority on single", "--priority", "on"),
    _train("unknown priority", "--arch", "p2p", "--priority", "high"),
    _train("partition with topk", "--arch", "p2p", "--partition-mb", "1", "--compression", "topk"),
    _train(
        "sync every with powersgd",
        "--arch",
        "ring",
        "--sync-every",
        "2",
        "--compression",
        "powersgd",
    ),
    _train("charlm on images", "--model", "charlm"),
    _train("keras net on fashion_mnist", "--model", "mobilenetv2"),
    _train("mnist without data dir", "--dataset", "mnist"),
    _train("mnist missing dir", "--dataset", "mnist", "--data-dir", "{ws}/nowhere"),
    _train("mnist empty dir", "--dataset", "mnist", "--data-dir", "{ws}/empty"),
    _train("mnist garbage gz", "--dataset", "mnist", "--data-dir", "{ws}/idx-garbage-gz"),
    _train("mnist cut gz", "--dataset", "mnist", "--data-dir", "{ws}/idx-cut-gz"),
    _train("mnist header cut", "--dataset", "mnist", "--data-dir", "{ws}/idx-cut-header"),
    _train("mnist counts differ", "--dataset", "mnist", "--data-dir", "{ws}/idx-counts"),
    _train("mnist size wrong", "--dataset", "mnist", "--data-dir", "{ws}/idx-size"),
    _train("mnist all garbage", "--dataset", "mnist", "--data-dir", "{ws}/idx-all-bad", lines=4),
    _train("fashion_mnist data dir a file", "--data-dir", "{ws}/records/norecord.jsonl"),
    _train("cifar10 without data dir", "--dataset", "cifar10"),
    _train("cifar10 missing batches", "--dataset", "cifar10", "--data-dir", "{ws}/empty"),
    _train("cifar10 garbage batch", "--dataset", "cifar10", "--data-dir", "{ws}/cifar-garbage"),
    _train("text file missing", "--dataset", "text", "--model", "charlm", "--text-file", "/no"),
    _train("text file a folder", "--dataset", "text", "--model", "charlm", "--text-file", "{ws}"),
    _train(
        "text file /dev/zero", "--dataset", "text", "--model", "charlm", "--text-file", "/dev/zero"
    ),
    # sparse models and partitioning (issue 15)
    _train(
        "words empty corpus",
        "--dataset",
        "words",
        "--model",
        "wordlm",
        "--text-file",
        "{ws}/empty.txt",
    ),
    _train("vocab size 0", "--dataset", "words", "--model", "wordlm", "--vocab-size", "0"),
    _train("vocab size -3", "--dataset", "words", "--model", "wordlm", "--vocab-size", "-3"),
    _train("wordlm on images", "--model", "wordlm"),
    _train("unknown data partition", "--arch", "ring", "--data-partition", "metis"),
    _train("graph partition of images", "--arch", "ring", "--data-partition", "graph"),
    _train(
        "data partition on single",
        "--arch",
        "single",
        "--dataset",
        "words",
        "--model",
        "wordlm",
        "--data-partition",
        "contiguous",
    ),
    _train(
        "param partition on ring",
        "--arch",
        "ring",
        "--dataset",
        "words",
        "--model",
        "wordlm",
        "--param-partition",
        "hash",
    ),
    _train(
        "param partition dense",
        "--arch",
        "ps",
        "--dataset",
        "words",
        "--model",
        "wordlm",
        "--param-partition",
        "round-robin",
    ),
    _train(
        "param partition of mlp",
        "--arch",
        "ps",
        "--sparse-exchange",
        "sparse",
        "--param-partition",
        "hash",
    ),
    _train(
        "by-use without a data partition",
        "--arch",
        "ps",
        "--dataset",
        "words",
        "--model",
        "wordlm",
        "--sparse-exchange",
        "sparse",
        "--param-partition",
        "by-use",
    ),
    _train("sparse async ps", "--arch", "ps", "--async", "--sparse-exchange", "sparse"),
    _train(
        "sparse with topk", "--arch", "p2p", "--sparse-exchange", "sparse", "--compression", "topk"
    ),
    Case("train out a folder", [*TRAIN, "--out", "{ws}"]),
    Case("train out /dev/full", [*TRAIN, "--out", "/dev/full"]),
    Case("train out /dev/null", [*TRAIN, "--out", "/dev/null"]),
    Case("train out /proc/version", [*TRAIN, "--out", "/proc/version"]),
    Case("train out in a missing folder", [*TRAIN, "--out", "{ws}/nowhere/r.jsonl"]),
    Case("train out read-only file system", [*TRAIN, "--out", "/proc/archbench.common.jsonl"]),
    _train("steps within the default warm-up", "--steps", "3"),
]


def _many_levels(names: tuple[str, ...], count: int, extra: str = "") -> str:
    """A localhost spec whose factors `names` each have the levels 1..count."""
    factors = ", ".join(f"{name}: {list(range(1, count + 1))}" for name in names)
    return "fixed: {steps: 10}\ncluster: localhost\nfactors: {" + factors + "}\n" + extra


SWEEP_SPECS = {
    "not-yaml": "study: x\nfixed: [unclosed\n",
    "a-list": "- arch: ring\n",
    "unknown-key": "study: x\nfactorz: {}\n",
    "lr-nan": "fixed: {steps: 10}\nfactors: {lr: [.nan, 0.1]}\n",
    "lr-inf": "fixed: {steps: 10, lr: .inf}\n",
    "lr-zero": "fixed: {steps: 10, lr: 0}\n",
    "lr-range-nan": "factors: {lr: {min: .nan, max: 1}}\ndesign: {random: {n: 2}}\n",
    "seed-negative": "fixed: {steps: 10, seed: -1}\n",
    "study-seed-negative": "seed: -1\nfixed: {steps: 10}\n",
    "batch-zero": "fixed: {steps: 10, batch_size: 0}\n",
    "steps-inf": "fixed: {steps: .inf}\n",
    "steps-nan": "fixed: {steps: .nan}\n",
    "warmup-over-steps": "fixed: {steps: 20, warmup_steps: 100}\n",
    "synthetic-huge": "fixed: {steps: 10, dataset: synthetic, synthetic_samples: 1000000000}\n",
    "momentum-one": "fixed: {steps: 10, momentum: 1}\n",
    "workers-zero": "fixed: {steps: 10, arch: ring, workers: 0}\n",
    "num-ps-zero": "fixed: {steps: 10, arch: ps, num_ps: 0}\n",
    "sync-every-zero": "fixed: {steps: 10, arch: ring, sync_every: 0}\n",
    "sync-every-async": "fixed: {steps: 10, arch: ps, sync: false}\nfactors: {sync_every: [1, 4]}\n",
    "timeout-nan": "timeout_s: .nan\nfixed: {steps: 10}\n",
    "timeout-negative": "timeout_s: -1\nfixed: {steps: 10}\n",
    "repetitions-zero": "repetitions: 0\nfixed: {steps: 10}\n",
    "design-unknown": "design: sobol\nfixed: {steps: 10}\n",
    "cluster-unknown": "cluster: moon\nfixed: {steps: 10}\n",
    "model-unknown": "fixed: {steps: 10, model: nosuchnet}\n",
    "model-dataset": "fixed: {steps: 10, model: charlm}\n",
    "epochs-and-steps": "fixed: {steps: 10, epochs: 1}\n",
    "duplicate-level": "fixed: {steps: 10}\nfactors: {lr: [0.1, 0.1]}\n",
    "empty-levels": "fixed: {steps: 10}\nfactors: {lr: []}\n",
    "unknown-setting": "fixed: {steps: 10, learning_rate: 0.1}\n",
    "reserved-setting": "fixed: {steps: 10, out: x.jsonl}\n",
    "bad-study-name": "study: 'a b'\nfixed: {steps: 10}\n",
    "python-missing": "python: /nonexistent/python\nfixed: {steps: 10}\ncluster: localhost\n",
    "python-not-a-program": "python: {ws}/records/norecord.jsonl\nfixed: {steps: 10}\n"
    "cluster: localhost\n",
    "python-a-folder": "python: {ws}\nfixed: {steps: 10}\ncluster: localhost\n",
    "python-without-archbench": "python: /bin/true\nfixed: {steps: 10}\ncluster: localhost\n",
    "bandwidth-on-localhost": "fixed: {steps: 10, arch: ring, bandwidth: 1gbit}\ncluster: localhost\n",
    "bandwidth-garbage": "fixed: {steps: 10, arch: ring, bandwidth: fast}\n",
    "powersgd-on-p2p": "fixed: {steps: 10, arch: p2p, compression: powersgd}\n",
    "compression-ratio-zero": "fixed: {steps: 10, arch: ring, compression: topk, compression_ratio: 0}\n",
    "gloo-with-mpirun": "fixed: {steps: 10, arch: ring, controller: gloo, launcher: mpirun}\n",
    "exclude-unknown-level": "fixed: {steps: 10}\nfactors: {lr: [0.1, 0.2]}\nexclude: [{lr: 0.3}]\n",
    # the spec is input, not code; sizes have limits (issue 27)
    "study-name-newline": 'study: "evil\\n"\nfixed: {steps: 10}\ncluster: localhost\n',
    "duplicate-key": "fixed: {steps: 10, lr: 0.1}\nfixed: {steps: 20}\ncluster: localhost\n",
    "python-a-shell": "python: /bin/sh\nfixed: {steps: 10}\ncluster: localhost\n",
    "python-named-python-without-archbench": "python: {ws}/fakebin/python\nfixed: {steps: 10}\n"
    "cluster: localhost\n",
    "extra-args-out": "fixed: {steps: 10, extra_args: [--out, '{ws}/elsewhere.jsonl']}\n"
    "cluster: localhost\n",
    "extra-args-out-abbreviated": "fixed: {steps: 10, extra_args: ['--ou={ws}/x.jsonl']}\n"
    "cluster: localhost\n",
    "extra-args-a-setting": "fixed: {steps: 10, extra_args: [--arch, ring]}\ncluster: localhost\n",
    "launcher-args-agent": "launcher_args: [--mca, plm_rsh_agent, /tmp/agent]\n"
    "fixed: {steps: 10}\ncluster: localhost\n",
    "launcher-args-output": "launcher_args: [--output-filename, /tmp/out]\nfixed: {steps: 10}\n",
    "env-ld-preload": "env: {LD_PRELOAD: /tmp/x.so}\nfixed: {steps: 10}\ncluster: localhost\n",
    "repetitions-huge": "repetitions: 1000000000\nfixed: {steps: 10}\ncluster: localhost\n",
    "levels-too-many": _many_levels(("seed",), 1001),
    "full-factorial-ten-million": _many_levels(
        (
            "seed",
            "batch_size",
            "eval_every",
            "eval_samples",
            "threads",
            "probe_every",
            "compression_warmup_steps",
        ),
        10,
    ),  # fmt: skip
    "random-n-huge": "fixed: {steps: 10}\ncluster: localhost\n"
    "factors: {lr: {min: 0.01, max: 0.1}}\ndesign: {random: {n: 1000000000}}\n",
    "runs-too-many": _many_levels(("seed",), 100, "repetitions: 1000\n"),
    "nodes-thousand": "cluster: {kind: emulated, nodes: 1000}\nfixed: {steps: 10, arch: ring}\n",
    "cluster-beyond-this-machine": "cluster: {kind: emulated, nodes: 2, dilation: 1000}\n"
    "fixed: {steps: 10, arch: ring}\n",
    "workers-huge": "fixed: {steps: 10, arch: ring, workers: 1000000000}\ncluster: localhost\n",
    "steps-within-warm-up": "fixed: {steps: 3}\ncluster: localhost\n",
    # issue 49: a spec's files and words may not reach a launcher's or ssh's options
    "placement-hostfile-dash": "cluster: localhost\nfixed: {arch: ring, workers: 2, "
    "launcher: horovodrun, controller: gloo, placement: '{ws}/hosts/dash.txt', steps: 10}\n",
    "placement-hostfile-huge-slots": "cluster: localhost\nfixed: {arch: ring, workers: 2, "
    "placement: '{ws}/hosts/huge-slots.txt', steps: 10}\n",
    "cluster-hostfile-latin1": "cluster: {kind: hostfile, hostfile: '{ws}/hosts/latin1.txt'}\n"
    "fixed: {arch: ring, steps: 10}\n",
    "extra-args-runs-file": "fixed: {steps: 10, extra_args: ['--runs-file', '{ws}/runs/ok.json']}\n"
    "cluster: localhost\n",
    "launcher-args-rankfile": "launcher_args: [--mca, orte_rankfile, '{ws}/hosts/dash.txt']\n"
    "fixed: {steps: 10}\ncluster: localhost\n",
    "env-mca-rankfile": "env: {OMPI_MCA_orte_rankfile: '{ws}/hosts/dash.txt'}\n"
    "fixed: {steps: 10}\ncluster: localhost\n",
    "python-a-script-named-python3": "python: '{ws}/scriptbin/python3'\nfixed: {steps: 10}\n"
    "cluster: localhost\n",
}

SWEEP_CASES = [_sweep(name.replace("-", " "), name) for name in SWEEP_SPECS] + [
    Case("sweep missing spec", [*CLI, "sweep", "{ws}/specs/nosuch.yaml"]),
    Case("sweep spec a folder", [*CLI, "sweep", "{ws}/specs"]),
    Case("sweep --only no '='", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--only", "arch"]),
    Case("sweep --only unknown", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--only", "colour=red"]),
    Case("sweep --only bad level", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--only", "lr=.nan"]),
    Case("sweep --cluster moon", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--cluster", "moon"]),
    Case(
        "sweep --only a level the study lacks",
        [*CLI, "sweep", "{ws}/specs/lr.yaml", "--only", "lr=0.5"],
    ),
    Case(
        "sweep --only levels no run has together",
        [
            *CLI,
            "sweep",
            "{ws}/specs/lr.yaml",
            "--dry-run",
            "--only",
            "lr=0.1",
            "--only",
            "arch=ring",
        ],
    ),
    Case(
        "sweep nodes thousand --dry-run",
        [*CLI, "sweep", "{ws}/specs/nodes-thousand.yaml", "--dry-run"],
    ),
    Case(
        "sweep cluster beyond this machine --dry-run",
        [*CLI, "sweep", "{ws}/specs/cluster-beyond-this-machine.yaml", "--dry-run"],
    ),
    Case("sweep spec too large", [*CLI, "sweep", "{ws}/specs/huge.yaml"]),
    Case("sweep spec file name with a newline", [*CLI, "sweep", "{ws}/specs/bad\nname.yaml"]),
    # a garbage line mid-file: said once, with its line number; the runs go on (dry run here)
    Case(
        "sweep resume over a garbage line",
        [*CLI, "sweep", "{ws}/specs/resume.yaml", "--dry-run"],
        status=0,
        lines=2,
        says="results.jsonl:2: not a JSON record; left in place",
    ),
]

SUBMIT_CASES = [
    Case(
        "submit spec named with a command",
        [*CLI, "submit", "{ws}/specs/x\ntouch pwned\n.yaml", "--dry-run"],
    ),
    Case("submit study folder with a blank", [*CLI, "submit", "{ws}/sp ace/ok.yaml", "--dry-run"]),
    Case(
        "submit python a script named python3",
        [*CLI, "submit", "{ws}/specs/python-a-script-named-python3.yaml", "--dry-run"],
    ),
    Case("submit nodes 0", [*CLI, "submit", "{ws}/specs/ok.yaml", "--nodes", "0", "--dry-run"]),
    Case(
        "submit time garbage",
        [*CLI, "submit", "{ws}/specs/ok.yaml", "--time", "1:00\n", "--dry-run"],
    ),
]

REPORT_CASES = [
    Case("report missing path", [*CLI, "report", "{ws}/nosuch"]),
    Case("report empty folder", [*CLI, "report", "{ws}/empty"]),
    Case("report empty file", [*CLI, "report", "{ws}/records/empty.jsonl"]),
    Case("report no run record", [*CLI, "report", "{ws}/records/norecord.jsonl"]),
    Case("report garbage file", [*CLI, "report", "{ws}/records/garbage.jsonl"]),
    Case("report out is a file", [*CLI, "report", "{ws}/records", "--out", "{ws}/records/x.txt"]),
    Case("report out in /sys", [*CLI, "report", "{ws}/records/odd.jsonl", "--out", "/sys/rep"]),
]

COMPARE_CASES = [
    Case("compare missing file", [*CLI, "compare", "{ws}/nosuch.jsonl"]),
    Case("compare no file", [*CLI, "compare"]),
    Case("compare empty file", [*CLI, "compare", "{ws}/records/empty.jsonl"]),
    Case("compare no run record", [*CLI, "compare", "{ws}/records/norecord.jsonl"]),
    Case("compare garbage file", [*CLI, "compare", "{ws}/records/garbage.jsonl"]),
    # records that cannot be (NaN, infinite, negative timings): named in the notes, exit 0
    Case(
        "compare impossible measurements",
        [*CLI, "compare", "{ws}/records/odd.jsonl"],
        status=0,
        lines=0,
        says="odd0: timing.samples_per_s infinite",
    ),
]

PREDICT_CASES = [
    Case("predict param bytes nan", [*PREDICT, "--param-bytes", "nan"]),
    Case("predict param bytes inf", [*PREDICT, "--param-bytes", "inf"]),
    Case("predict param bytes 0", [*PREDICT, "--param-bytes", "0"]),
    Case("predict param bytes -1", [*PREDICT, "--param-bytes=-1"]),
    Case("predict compute ms nan", [*PREDICT, "--compute-ms", "nan"]),
    Case("predict compute ms inf", [*PREDICT, "--compute-ms", "inf"]),
    Case("predict compute ms -1", [*PREDICT, "--compute-ms=-1"]),
    Case("predict hosts 0", [*PREDICT, "--hosts", "0"]),
    Case("predict hosts -4", [*PREDICT, "--hosts=-4"]),
    Case("predict workers 0", [*PREDICT, "--workers", "0"]),
    Case("predict workers -2", [*PREDICT, "--workers=-2"]),
    Case("predict batch size 0", [*PREDICT, "--batch-size", "0"]),
    Case("predict batch size nan", [*PREDICT, "--batch-size", "nan"]),
    Case("predict fusion nan", [*PREDICT, "--fusion-threshold-mb", "nan"]),
    Case("predict ps num ps 0", [*PREDICT, "--arch", "ps", "--num-ps", "0"]),
    Case("predict sync every 0", [*PREDICT, "--sync-every", "0"]),
    Case("predict sync every async ps", [*PREDICT, "--arch", "ps", "--async", "--sync-every", "4"]),
    Case("predict unknown arch", [*PREDICT, "--arch", "mesh"]),
    Case("predict powersgd on p2p", [*PREDICT, "--arch", "p2p", "--compression", "powersgd"]),
    Case("predict compression ratio 0", [*PREDICT, "--compression-ratio", "0"]),
    Case("predict powersgd rank 0", [*PREDICT, "--powersgd-rank", "0"]),
    Case("predict unknown model", [*PREDICT, "--model", "nosuchnet"]),
    Case("predict bandwidth garbage", [*PREDICT, "--bandwidth", "fast"]),
    Case("predict bandwidth nan", [*PREDICT, "--bandwidth", "nanmbit"]),
    Case("predict bandwidth 1e999", [*PREDICT, "--bandwidth", "1e999"]),
    Case("model whatif bandwidths 1e999", [*WHATIF, "--bandwidths", "1e999"]),
    Case("predict no model", [*CLI, "predict", "--arch", "ring", "--batch-size", "32"]),
    Case("predict calibration missing", [*PREDICT, "--calibration", "{ws}/nosuch.jsonl"]),
    Case("predict fit missing", [*PREDICT, "--fit", "{ws}/nosuch.json"]),
    Case(
        "predict shape too small for the model",
        [
            *PREDICT,
            "--model",
            "inceptionv3",
            "--dataset",
            "synthetic",
            "--synthetic-shape",
            "10x10x3",
        ],
    ),
    Case("predict shape garbage", [*PREDICT, "--dataset", "synthetic", "--synthetic-shape", "axb"]),
    Case(
        "predict shape too large",
        [*PREDICT, "--dataset", "synthetic", "--synthetic-shape", "100000x100000x3"],
    ),
    Case("predict compute from missing", [*PREDICT[:-2], "--compute-from", "{ws}/nosuch.jsonl"]),
    Case("predict compute ms and from", [*PREDICT, "--compute-from", "{ws}/nosuch.jsonl"]),
    Case("predict no compute known", PREDICT[:-2]),
    Case(
        "model whatif compute ms garbage",
        [*CLI, "model", "whatif", "--models", "mlp", "--compute-ms", "fast"],
    ),
    Case("predict workers huge", [*PREDICT, "--workers", "1000000000"]),
    Case("predict hosts huge", [*PREDICT, "--hosts", "1000000000"]),
    Case(
        "predict compute from a binary file", [*PREDICT[:-2], "--compute-from", "{ws}/binary.jsonl"]
    ),
    Case("predict fit a binary file", [*PREDICT, "--fit", "{ws}/binary.json"]),
    Case("predict calibration a JSON list", [*PREDICT, "--calibration", "{ws}/list.json"]),
    Case("model whatif workers huge", [*WHATIF, "--workers", "2,1000000000"]),
    Case("model whatif workers list too long", [*WHATIF, "--workers", ",".join(["2"] * 65)]),
    Case("model whatif batch size -1", [*WHATIF, "--batch-size", "-1"]),
    Case("model whatif out in /sys", [*WHATIF, "--workers", "2,4", "--out", "/sys/whatif"]),
    Case(
        "model fit out in /sys",
        [*CLI, "model", "fit", "{ws}/records/odd.jsonl", "--out", "/sys/fit.json"],
    ),
    Case("microbench message 8G", [*CLI, "microbench", "--sizes", "8G", "--out", "{out}"]),
]


def _timeline(name: str, trace: str, *args: str) -> Case:
    return Case(f"timeline {name}", [*CLI, "timeline", f"{{ws}}/traces/{trace}", *args])


# issue 49: a trace is data; it names no file and its numbers are checked
TIMELINE_CASES = [
    _timeline("missing file", "nosuch.json"),
    _timeline("nested json", "../nested.json"),
    _timeline("out dir an existing file", "ok.json", "--out-dir", "{ws}/records/x.txt"),
    _timeline("out dir /dev/null", "ok.json", "--out-dir", "/dev/null"),
    _timeline("out dir in a missing folder", "ok.json", "--out-dir", "{ws}/nowhere/out"),
    _timeline("args null", "args-null.json", "--out-dir", "{ws}/gantt"),
    _timeline("ts and dur 1e308", "huge-times.json", "--out-dir", "{ws}/gantt"),
    _timeline("dilation factor zero", "dilation-zero.json", "--out-dir", "{ws}/gantt"),
    _timeline("step junk", "step-junk.json", "--out-dir", "{ws}/gantt"),
    _timeline("step a path", "step-path.json", "--out-dir", "{ws}/gantt"),
    _timeline("step a path, default out dir", "step-path.json"),
]

# issue 49: every reader of a user's JSON bounds nesting; host names pass one checker
READER_CASES = [
    Case("train runs file nested json", [*TRAIN, "--runs-file", "{ws}/nested.json"]),
    Case("train runs file launched_at NaN", [*TRAIN, "--runs-file", "{ws}/runs/nan.json"]),
    Case("train runs file launched_at a string", [*TRAIN, "--runs-file", "{ws}/runs/text.json"]),
    Case("train runs file run id with a newline", [*TRAIN, "--runs-file", "{ws}/runs/id.json"]),
    _train("run id empty", "--run-id", ""),
    _train("run id with a newline", "--run-id", "r1\n# Finding: forged"),
    _train("study with a newline", "--study", "s\n## forged"),
    Case("report nested json", [*CLI, "report", "{ws}/records/nested.jsonl"]),
    Case("compare nested json", [*CLI, "compare", "{ws}/records/nested.jsonl"]),
    Case("doctor hostfile not utf-8", [*CLI, "doctor", "--hostfile", "{ws}/hosts/latin1.txt"]),
    Case(
        "doctor hostfile line starting with -",
        [*CLI, "doctor", "--hostfile", "{ws}/hosts/dash.txt"],
    ),
    Case("doctor hostfile slots huge", [*CLI, "doctor", "--hostfile", "{ws}/hosts/huge-slots.txt"]),
    Case("doctor host list option", [*CLI, "doctor", "--hosts=-oProxyCommand=touch:1"]),
    Case(
        "microbench hostfile not utf-8",
        [*CLI, "microbench", "--hostfile", "{ws}/hosts/latin1.txt", "--out", "{out}"],
    ),
    Case(
        "microbench hostfile slots huge",
        [*CLI, "microbench", "--hostfile", "{ws}/hosts/huge-slots.txt", "--out", "{out}"],
    ),
]

INIT = [*CLI, "init", "--hostfile", "{ws}/hosts/lh.txt", "--bandwidth", "1gbit"]
FIT = [*CLI, "model", "fit", "{ws}/study"]
VALIDATE = [*CLI, "model", "validate", "{ws}/study"]
OPTIMIZE = [*CLI, "optimize", "{ws}/specs/ok.yaml", "--no-measure"]

# issue 49 in init, the performance model and the report: values that reach a generated spec are
# one line, -o and --out are files or new names (never a device, a folder, or a tree of folders
# nobody asked for), every number is finite and in its row's range, every JSON read is bounded
INIT_AND_MODEL_CASES = [
    Case("init data dir with a newline",
         [*INIT, "--data-dir", "/tmp/dd\n  warmup_steps: 7\n  #"]),
    Case("init out folder with a newline", [*INIT, "-o", "d\nenv: {X: '1'}\n#/mine.yaml"]),
    Case("init hostfile path with a newline",
         [*CLI, "init", "--hostfile", "{ws}/hosts/l\nenv: {X: '1'}\n#.txt", "--bandwidth", "1gbit"]),
    Case("init out /dev/null force", [*INIT, "-o", "/dev/null", "--force"]),
    Case("init out a pipe force", [*INIT, "-o", "{ws}/pipe", "--force"]),
    Case("init force out a folder", [*INIT, "--force", "-o", "{ws}/empty"]),
    Case("init out in a missing tree", [*INIT, "-o", "nowhere/deeper/mine.yaml"]),
    Case("init hostfile not utf-8",
         [*CLI, "init", "--hostfile", "{ws}/hosts/latin1.txt", "--bandwidth", "1gbit"]),
    Case("init cluster a path", [*CLI, "init", "--cluster", "../../../tmp/x"]),
    Case("predict calibration nested json", [*PREDICT, "--calibration", "{ws}/nested.json"]),
    Case("predict calibration nested jsonl",
         [*PREDICT, "--calibration", "{ws}/records/nested.jsonl"]),
    Case("predict fit nested json", [*PREDICT, "--fit", "{ws}/nested.json"]),
    Case("model validate study nested jsonl", [*CLI, "model", "validate", "{ws}/nested-study"]),
    Case("model validate fit nested json", [*VALIDATE, "--fit", "{ws}/nested.json"]),
    Case("model validate calibration nested json",
         [*VALIDATE, "--calibration", "{ws}/nested.json"]),
    Case("microbench seconds per size nan",
         [*CLI, "microbench", "--seconds-per-size", "nan", "--out", "{out}"]),
    Case("microbench timeout inf", [*CLI, "microbench", "--timeout", "inf", "--out", "{out}"]),
    Case("microbench compute steps 0",
         [*CLI, "microbench", "--compute-steps", "0", "--out", "{out}"]),
    Case("microbench threads -1", [*CLI, "microbench", "--threads=-1", "--out", "{out}"]),
    Case("predict bandwidth 1e999", [*PREDICT, "--bandwidth", "1e999"]),
    Case("model whatif bandwidths 1e999", [*WHATIF, "--bandwidths", "1e999"]),
    Case("model whatif touched rows nan",
         [*WHATIF, "--sparse-exchange", "sparse", "--touched-rows", "nan"]),
    Case("model whatif batch size nan", [*WHATIF, "--batch-size", "nan"]),
    Case("model validate seed -1", [*VALIDATE, "--seed", "-1"]),
    Case("model validate train fraction nan",
         [*VALIDATE, "--split", "random", "--train-fraction", "nan"]),
    Case("model fit cut 0", [*FIT, "--cut", "0"]),
    Case("model fit train fraction 1e999", [*FIT, "--train-fraction", "1e999"]),
    Case("optimize budget 0", [*OPTIMIZE, "--budget", "0"]),
    Case("optimize budget fraction nan", [*OPTIMIZE, "--budget-fraction", "nan"]),
    Case("optimize tolerance inf", [*OPTIMIZE, "--tolerance", "inf"]),
    Case("optimize target accuracy 2", [*OPTIMIZE, "--target-accuracy", "2"]),
    Case("model fit out a folder", [*FIT, "--out", "{ws}/empty"]),
    Case("model fit out /dev/null", [*FIT, "--out", "/dev/null"]),
    Case("model whatif out /nonexistent/dir/x", [*WHATIF, "--out", "/nonexistent/dir/x"]),
    Case("model whatif out in a missing tree", [*WHATIF, "--out", "nowhere/dir/x"]),
    # what the report reads of them: the values left out and named, nothing shown as inf or nan
    Case(
        "compare accuracy inf and -1e300",
        [*CLI, "compare", "{ws}/records/accuracy.jsonl"],
        status=0,
        lines=0,
        says="acc1: result.test_accuracy negative (-1e+300)",
    ),
    Case(
        "compare config not a dict",
        [*CLI, "compare", "{ws}/records/notadict.jsonl"],
        status=0,
        lines=0,
        says="shape0: config is str, not an object",
    ),
]  # fmt: skip

CLUSTER_CASES = [
    Case(
        "cluster up cfs period nan",
        [*CLI, "cluster", "up", "--nodes", "2", "--cfs-period-ms", "nan"],
    ),
    Case("cluster status name a path", [*CLI, "cluster", "status", "--name", "../../../tmp/x"]),
    Case("cluster no action", [*CLI, "cluster"]),
    Case("cluster unknown action", [*CLI, "cluster", "explode"]),
    Case("cluster up nodes 0", [*CLI, "cluster", "up", "--nodes", "0"]),
    Case("cluster up nodes -1", [*CLI, "cluster", "up", "--nodes=-1"]),
    Case("cluster up nodes text", [*CLI, "cluster", "up", "--nodes", "three"]),
    Case("cluster up no nodes", [*CLI, "cluster", "up"]),
    Case(
        "cluster up bandwidth garbage", [*CLI, "cluster", "up", "--nodes", "2", "--bandwidth", "x"]
    ),
    Case("cluster up latency", [*CLI, "cluster", "up", "--nodes", "2", "--latency", "5ms"]),
    Case("cluster up bad name", [*CLI, "cluster", "up", "--nodes", "2", "--name", "a b"]),
    Case("cluster up bad prefix", [*CLI, "cluster", "up", "--nodes", "2", "--prefix", "NODE"]),
    Case("cluster shape bandwidth garbage", [*CLI, "cluster", "shape", "--bandwidth", "x"]),
    Case(
        "cluster up name with a newline",
        [*CLI, "cluster", "up", "--nodes", "2", "--name", "evil\n"],
    ),
    Case(
        "cluster up prefix with a newline",
        [*CLI, "cluster", "up", "--nodes", "2", "--prefix", "node\n"],
    ),
    Case("cluster up nodes 1000", [*CLI, "cluster", "up", "--nodes", "1000"]),
    Case("cluster down name a path", [*CLI, "cluster", "down", "--name", "../.."]),
    Case("cluster status name with a newline", [*CLI, "cluster", "status", "--name", "a\nb"]),
    Case("cluster env name a path", [*CLI, "cluster", "env", "--name", "../x"]),
]

OTHER_CASES = [
    Case("unknown command", [*CLI, "explode"]),
    Case("no command", [*CLI]),
]

# A user's model and data (archbench.workloads): each bad file, through every command that takes
# a model or a data set before anything runs. The files: prepare_user_inputs.
_USER_MODELS = {
    "model file missing": "{ws}/user/missing.py:build",
    "model function missing": "{ws}/user/good.py:nothere",
    "model raises": "{ws}/user/raises.py:build",
    "model syntax error": "{ws}/user/syntax.py:build",
    "model not a keras model": "{ws}/user/notmodel.py:build",
    "model wrong outputs": "{ws}/user/narrow.py:build",
    "model softmax": "{ws}/user/softmax.py:build",
    "model takes no arguments": "{ws}/user/noargs.py:build",
    "model module missing": "no_such_package.models:build",
    "saved model not a model": "{ws}/user/notmodel.keras",
    "saved model nested": "{ws}/user/deep.keras",
    "saved model h5 garbage": "{ws}/user/garbage.h5",
}
_USER_DATA = {
    "npz missing key": "npz:{ws}/user/nokey.npz",
    "npz lengths differ": "npz:{ws}/user/short.npz",
    "npz negative label": "npz:{ws}/user/negative.npz",
    "npz fractional label": "npz:{ws}/user/fraction.npz",
    "npz nan": "npz:{ws}/user/nan.npz",
    "npz inf": "npz:{ws}/user/inf.npz",
    "npz garbage": "npz:{ws}/user/notnpz.npz",
    "npz missing": "npz:{ws}/user/missing.npz",
    "npy folder missing": "npy:{ws}/user/nofolder",
    "npy missing y_test": "npy:{ws}/user/npy-partial",
    "csv garbage": "csv:{ws}/user/garbage.csv",
    "csv empty cell": "csv:{ws}/user/holes.csv",
    "csv one column": "csv:{ws}/user/onecolumn.csv",
    "csv a folder": "csv:{ws}/user",
    "series too short": "series:{ws}/user/short-series.csv",
    "unknown form": "parquet:{ws}/user/x.parquet",
    "empty path": "npz:",
}
_PREDICT_USER = [*CLI, "predict", "--arch", "ring", "--workers", "2", "--batch-size", "32"]
_PREDICT_USER += ["--compute-ms", "5"]
_INIT_USER = [*CLI, "init", "--hostfile", "{ws}/hosts/lh.txt", "--bandwidth", "1gbit"]
_MICROBENCH_USER = [*CLI, "microbench", "-H", "localhost", "--benches", "compute"]
USER_WORKLOAD_CASES = (
    [Case(f"train {name}", [*TRAIN, "--model", model, "--steps", "6", "--out", "{out}"])
     for name, model in _USER_MODELS.items()]
    + [Case(f"train {name}", [*TRAIN, "--dataset", data, "--steps", "6", "--out", "{out}"])
       for name, data in _USER_DATA.items()]
    + [Case("train csv label column missing", [*TRAIN, "--dataset", "csv:{ws}/user/table.csv",
                                                "--label-column", "kind", "--out", "{out}"])]
    + [Case(f"predict {name}", [*_PREDICT_USER, "--model", model]) for name, model in _USER_MODELS.items()]
    + [Case(f"predict {name}", [*_PREDICT_USER, "--model", "mlp", "--dataset", data])
       for name, data in _USER_DATA.items()]
    + [Case(f"init {name}", [*_INIT_USER, "--model", model]) for name, model in _USER_MODELS.items()]
    + [Case(f"init {name}", [*_INIT_USER, "--model", "mlp", "--dataset", data])
       for name, data in _USER_DATA.items()]
    + [Case(f"microbench {name}", [*_MICROBENCH_USER, "--models", "mlp", "--dataset", data])
       for name, data in _USER_DATA.items()]
)  # fmt: skip

CASES = (
    TRAIN_CASES
    + USER_WORKLOAD_CASES
    + SWEEP_CASES
    + SUBMIT_CASES
    + REPORT_CASES
    + COMPARE_CASES
    + PREDICT_CASES
    + CLUSTER_CASES
    + TIMELINE_CASES
    + READER_CASES
    + INIT_AND_MODEL_CASES
    + OTHER_CASES
)


_USER_MODEL_FILES = {
    "good.py": "import tensorflow as tf\n\n\ndef build(input_shape, num_outputs):\n"
    "    inputs = tf.keras.Input(shape=input_shape)\n"
    "    x = tf.keras.layers.Flatten()(inputs)\n"
    "    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs)(x))\n",
    "raises.py": "def build(input_shape, num_outputs):\n    raise ValueError('no such width')\n",
    "syntax.py": "def build(:\n",
    "notmodel.py": "def build(input_shape, num_outputs):\n    return 42\n",
    "noargs.py": "def build():\n    return None\n",
    "narrow.py": "import tensorflow as tf\n\n\ndef build(input_shape, num_outputs):\n"
    "    inputs = tf.keras.Input(shape=input_shape)\n"
    "    x = tf.keras.layers.Flatten()(inputs)\n"
    "    return tf.keras.Model(inputs, tf.keras.layers.Dense(3)(x))\n",
    "softmax.py": "import tensorflow as tf\n\n\ndef build(input_shape, num_outputs):\n"
    "    inputs = tf.keras.Input(shape=input_shape)\n"
    "    x = tf.keras.layers.Flatten()(inputs)\n"
    "    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs, activation='softmax')(x))\n",
}


def prepare_user_inputs(ws: Path) -> None:
    """A user's model and data files, each with exactly the problem its case names."""
    import zipfile

    import numpy as np

    user = ws / "user"
    user.mkdir(parents=True)
    for name, text in _USER_MODEL_FILES.items():
        (user / name).write_text(text)
    (user / "notmodel.keras").write_text("not a model")
    with zipfile.ZipFile(user / "deep.keras", "w") as archive:
        archive.writestr("config.json", "[" * 100_000)
    (user / "garbage.h5").write_bytes(os.urandom(512))
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 4), dtype=np.float32), rng.integers(0, 3, 40)
    np.savez(user / "nokey.npz", x_train=x, y_train=y, x_test=x)
    np.savez(user / "short.npz", x_train=x, y_train=y[:-1], x_test=x, y_test=y)
    np.savez(user / "negative.npz", x_train=x, y_train=y - 1, x_test=x, y_test=y)
    np.savez(user / "fraction.npz", x_train=x, y_train=y + 0.5, x_test=x, y_test=y)
    holes = x.copy()
    holes[7, 2] = np.nan
    np.savez(user / "nan.npz", x_train=holes, y_train=y, x_test=x, y_test=y)
    holes = x.copy()
    holes[3, 0] = np.inf
    np.savez(user / "inf.npz", x_train=x, y_train=y, x_test=holes, y_test=y)
    (user / "notnpz.npz").write_text("not an archive")
    partial = user / "npy-partial"
    partial.mkdir()
    for key, array in (("x_train", x), ("y_train", y), ("x_test", x)):
        np.save(partial / f"{key}.npy", array)
    (user / "garbage.csv").write_bytes(b"\x00\xff\xfe garbage\n\x81\x82\n")
    (user / "holes.csv").write_text("a,b,label\n1,,x\n3,4,y\n5,6,x\n7,8,y\n")
    (user / "onecolumn.csv").write_text("label\nx\ny\n")
    (user / "table.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n7,8,y\n")
    (user / "short-series.csv").write_text("t,v\n1,2\n2,3\n3,4\n")


def prepare_workspace(ws: Path) -> None:
    """The damaged files the cases point at, each with exactly the problem its name says."""
    prepare_user_inputs(ws)
    (ws / "empty").mkdir(parents=True)
    (ws / "empty.txt").write_text("")
    records = ws / "records"
    records.mkdir()
    (records / "empty.jsonl").write_text("")
    (records / "norecord.jsonl").write_text('{"a": 1}\n{"run_id": "x"}\n')
    (records / "garbage.jsonl").write_bytes(b"\x00\xff garbage\nnot json\n")
    (records / "x.txt").write_text("a file, not a folder\n")

    def idx_copy(name: str, compress: bool = False) -> Path:
        folder = ws / name
        folder.mkdir()
        write_mnist_like(folder, compress=compress)
        return folder

    idx_copy("idx-garbage-gz", compress=True)
    (ws / "idx-garbage-gz/train-labels-idx1-ubyte.gz").write_bytes(os.urandom(300))
    folder = idx_copy("idx-cut-gz", compress=True)
    whole = (folder / "t10k-images-idx3-ubyte.gz").read_bytes()
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(whole[: len(whole) // 2])
    folder = idx_copy("idx-cut-header")
    (folder / "train-images-idx3-ubyte").write_bytes(
        (folder / "train-images-idx3-ubyte").read_bytes()[:6]
    )
    folder = idx_copy("idx-counts")
    import numpy as np

    write_idx(folder / "train-labels-idx1-ubyte", np.zeros(59, dtype=np.uint8), compress=False)
    folder = idx_copy("idx-size")
    with open(folder / "t10k-labels-idx1-ubyte", "ab") as handle:
        handle.write(b"\x01\x02")
    folder = ws / "idx-all-bad"
    folder.mkdir()
    for name in ("train-images", "train-labels", "t10k-images", "t10k-labels"):
        suffix = "idx3-ubyte" if "images" in name else "idx1-ubyte"
        (folder / f"{name}-{suffix}.gz").write_bytes(b"not gzip at all")
    folder = ws / "cifar-garbage"
    folder.mkdir()
    write_cifar_like(folder)
    (folder / "data_batch_3").write_bytes(b"this is not a pickle")

    specs = ws / "specs"
    specs.mkdir()
    (specs / "ok.yaml").write_text("fixed: {steps: 10}\ncluster: localhost\n")
    (specs / "lr.yaml").write_text(
        "fixed: {steps: 10}\ncluster: localhost\nfactors: {lr: [0.1, 0.2]}\n"
    )
    for name, text in SWEEP_SPECS.items():
        (specs / f"{name}.yaml").write_text(text.replace("{ws}", str(ws)))
    prepare_hostile_inputs(ws)
    prepare_model_inputs(ws)


def prepare_hostile_inputs(ws: Path) -> None:
    """The files of the issue-27 cases: names that would inject, sizes past a limit, records
    with measurements that cannot be, binary files where JSON belongs."""
    specs = ws / "specs"
    # its study is named in the file: the spec's path itself reaches the batch script
    (specs / "x\ntouch pwned\n.yaml").write_text(
        "study: hostile\nfixed: {steps: 10}\ncluster: localhost\n"
    )
    (specs / "bad\nname.yaml").write_text("fixed: {lr: -1}\n")
    (specs / "huge.yaml").write_text("# " + "x" * (1 << 20) + "\nfixed: {steps: 10}\n")
    (ws / "sp ace").mkdir()
    (ws / "sp ace" / "ok.yaml").write_text("fixed: {steps: 10}\ncluster: localhost\n")
    fake = ws / "fakebin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\nexit 0\n")
    (fake / "python").chmod(0o755)
    (specs / "resume.yaml").write_text("fixed: {steps: 10}\ncluster: localhost\n")
    kept = [json.dumps(minimal_record("single-0000000000-r1", 0.05)), "garbage {not json", ""]
    (specs / "resume").mkdir()
    (specs / "resume" / "results.jsonl").write_text("\n".join(kept))
    odd = [
        minimal_record("odd0", 0.01, samples_per_s=math.inf),
        minimal_record("odd1", 0.02, step_s_median=math.nan),
        minimal_record("odd2", 0.03, epoch_s=-3.0),
    ]
    write_records(ws / "records" / "odd.jsonl", odd)
    (ws / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    (ws / "binary.json").write_bytes(bytes(range(256)) * 4)
    (ws / "list.json").write_text("[1, 2]\n")
    prepare_issue49_inputs(ws)


def _trace(step: object = 7, ts: float = 0.0, dur: float = 130.0, **meta: object) -> dict:
    """A small trace as --timeline writes it (one rank, one step), with `meta` in otherData."""
    step_args = {"step": step}
    events = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0: chief on a"}},
        {"name": "step", "cat": "step", "ph": "X", "ts": ts, "dur": dur, "pid": 0, "tid": 0,
         "args": step_args},
        {"name": "f", "cat": "forward", "ph": "X", "ts": ts, "dur": 40.0, "pid": 0, "tid": 1,
         "args": step_args},
    ]  # fmt: skip
    other = {"writer": "archbench", "arch": "ring", "model": "mlp", "dilation_factor_D": 1.0}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {**other, **meta}}


def prepare_issue49_inputs(ws: Path) -> None:
    """Issue 49's files: hostfiles that would hand ssh an option, traces that would pick where
    a chart goes, JSON nested past any reader's stack, runs files with impossible values."""
    hosts = ws / "hosts"
    hosts.mkdir()
    (hosts / "dash.txt").write_text("-Fsshcfg slots=2\n")
    (hosts / "sshcfg").write_text("Host *\n  ProxyCommand touch PWNED\n")
    (hosts / "huge-slots.txt").write_text("localhost slots=99999999999999999999999\n")
    (hosts / "latin1.txt").write_bytes(b"n\xe9ud1 slots=1\n")
    scripts = ws / "scriptbin"
    scripts.mkdir()
    (scripts / "python3").write_text(f"#!/bin/sh\ntouch {ws}/RAN\n")
    (scripts / "python3").chmod(0o755)
    (ws / "nested.json").write_text("[" * 100000)
    (ws / "records" / "nested.jsonl").write_text("[" * 100000 + "\n")
    runs = ws / "runs"
    runs.mkdir()
    group = {
        "group": "g-1",
        "launched_at": 1.7e9,
        "runs": [{"run_id": "r1", "argv": ["--lr", "x"]}],
    }
    (runs / "ok.json").write_text(json.dumps(group))
    (runs / "nan.json").write_text(json.dumps({**group, "launched_at": math.nan}))
    (runs / "text.json").write_text(json.dumps({**group, "launched_at": "yesterday"}))
    run = {"run_id": "r1\n# forged", "argv": ["--lr", "x"]}
    (runs / "id.json").write_text(json.dumps({**group, "runs": [run]}))
    traces = ws / "traces"
    traces.mkdir()
    (traces / "ok.json").write_text(json.dumps(_trace()))
    args_null = _trace()
    args_null["traceEvents"].append({"name": "thread_name", "ph": "M", "pid": 0, "args": None})
    (traces / "args-null.json").write_text(json.dumps(args_null))
    (traces / "huge-times.json").write_text(json.dumps(_trace(ts=1e308, dur=1e308)))
    (traces / "dilation-zero.json").write_text(json.dumps(_trace(dilation_factor_D="zero")))
    (traces / "step-junk.json").write_text(json.dumps(_trace(step="junk")))
    (traces / "step-path.json").write_text(json.dumps(_trace(step="x/../../../../tmp/ESCAPED")))
    (traces / "step-path-stepx").mkdir()  # the folder the step's path would walk through


def _timed_record(run_id: str, workers: int) -> dict:
    """A ring run the performance model's fit reads (workers, step time, gradient bytes)."""
    return {
        "schema": "archbench.run/1", "run_id": run_id, "study": "s", "status": "ok",
        "config": {"arch": "ring", "model": "mlp", "dataset": "fashion_mnist", "batch_size": 32,
                   "seed": 1},
        "cluster": {"world_size": workers, "num_workers": workers, "num_ps": 0, "link": "1gbit",
                    "hosts": ["localhost"] * workers,
                    "roles": ["chief"] + ["worker"] * (workers - 1)},
        "model_stats": {"params": 1000, "param_bytes": 4000},
        "timing": {"step_s_median": 0.01 * workers, "compute_s_median": 0.005},
    }  # fmt: skip


def prepare_model_inputs(ws: Path) -> None:
    """Issue 49's files for init, the performance model and the report: a hostfile, a study the
    fit reads, a pipe, records with accuracies that cannot be and one of the wrong shape."""
    hosts = ws / "hosts"
    hosts.mkdir(exist_ok=True)
    (hosts / "lh.txt").write_text("localhost slots=4\n")
    (hosts / "l\nenv: {X: '1'}\n#.txt").write_text("localhost slots=4\n")
    os.mkfifo(ws / "pipe")
    (ws / "nested-study").mkdir()
    (ws / "nested-study" / "results.jsonl").write_text("[" * 100000 + "\n")
    write_records(ws / "study" / "results.jsonl", [_timed_record(f"r{i}", w)
                                                   for i, w in enumerate((2, 2, 4, 4))])  # fmt: skip
    accuracy = [minimal_record("acc0", 0.01), minimal_record("acc1", 0.02)]
    accuracy[0]["result"] = {"test_accuracy": math.inf}
    accuracy[1]["result"] = {"test_accuracy": -1e300}
    write_records(ws / "records" / "accuracy.jsonl", accuracy)
    shape = [minimal_record("shape0", 0.01), minimal_record("shape1", 0.02)]
    shape[0]["config"] = "notadict"
    write_records(ws / "records" / "notadict.jsonl", shape)


@dataclass
class Outcome:
    case: Case
    returncode: int
    stdout: str
    stderr: str
    written: list[str]  # files that appeared or changed

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stdout + self.stderr

    def problems(self) -> list[str]:
        found = []
        if self.case.says and self.case.says not in self.stdout + self.stderr:
            found.append(f"does not say {self.case.says!r}")
        if self.traceback:
            found.append("a traceback")
        if self.returncode != self.case.status:
            found.append(f"exit {self.returncode}, not {self.case.status}")
        if len(self.stderr_lines) != self.case.lines:
            found.append(f"{len(self.stderr_lines)} lines on stderr, not {self.case.lines}")
        if self.written:
            found.append(f"wrote {', '.join(self.written)}")
        return found


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in folder.rglob("*")
        if path.is_file()
    }


def run_case(case: Case, ws: Path, scratch: Path) -> Outcome:
    """Runs one case in an empty folder of its own; what it wrote there or in ws is reported."""
    cwd = scratch / case.name.replace(" ", "_").replace("/", "_")
    cwd.mkdir(parents=True)
    out = cwd / "r.jsonl"
    argv = [word.replace("{ws}", str(ws)).replace("{out}", str(out)) for word in case.argv]
    before = _snapshot(ws)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("ARCHBENCH_TRACEBACK", None)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    after = _snapshot(ws)
    written = sorted(name for name in after if before.get(name) != after[name])
    written += sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*"))
    shutil.rmtree(cwd, ignore_errors=True)
    return Outcome(case, proc.returncode, proc.stdout, proc.stderr, written)


def run_table(ws: Path, scratch: Path, workers: int = 4) -> dict[str, Outcome]:
    """Every case, a few at a time (each is a short process that mostly waits on imports)."""
    with ThreadPoolExecutor(workers) as pool:
        outcomes = pool.map(lambda case: run_case(case, ws, scratch), CASES)
        return {outcome.case.name: outcome for outcome in outcomes}


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="archbench-bad-input-") as top:
        ws, scratch = Path(top) / "ws", Path(top) / "scratch"
        prepare_workspace(ws)
        outcomes = run_table(ws, scratch)
    failing = {name: o.problems() for name, o in outcomes.items() if o.problems()}
    tracebacks = sum(o.traceback for o in outcomes.values())
    for name, problems in failing.items():
        print(f"FAIL {name}: {'; '.join(problems)}")
        print("     " + outcomes[name].stderr.strip().replace("\n", "\n     "))
    print(
        f"{len(outcomes)} bad inputs: {tracebacks} tracebacks, {len(failing)} not as documented "
        f"(exit status, lines on stderr, nothing written)"
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
