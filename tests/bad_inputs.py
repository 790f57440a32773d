"""The bad-input table: what a new user might type, across every command, and what each must get.

Every case runs as a real process, the way a user types it, in an empty folder of its own. Each
must end with its documented exit status (2 unless said otherwise), exactly one line on stderr
(or the documented number: one per problem), no Python traceback, and nothing written anywhere.
A new setting adds its rows here.

`python tests/bad_inputs.py` runs the table outside pytest and prints the counts.
"""

from __future__ import annotations

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

TRAIN = [sys.executable, "-m", "archbench.train"]
CLI = [sys.executable, "-m", "archbench.cli"]
PREDICT = [*CLI, "predict", "--arch", "ring", "--workers", "2", "--model", "mlp"]
PREDICT += ["--batch-size", "32", "--compute-ms", "5"]


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]  # "{ws}" stands for the folder of prepared files
    status: int = 2
    lines: int = 1  # lines on stderr: one per problem


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
    Case("train out read-only file system", [*TRAIN, "--out", "/proc/archbench.jsonl"]),
]

SWEEP_SPECS = {
    "not-yaml": "study: x\nfixed: [unclosed\n",
    "a-list": "- arch: ring\n",
    "unknown-key": "study: x\nfactorz: {}\n",
    "lr-nan": "fixed: {steps: 5}\nfactors: {lr: [.nan, 0.1]}\n",
    "lr-inf": "fixed: {steps: 5, lr: .inf}\n",
    "lr-zero": "fixed: {steps: 5, lr: 0}\n",
    "lr-range-nan": "factors: {lr: {min: .nan, max: 1}}\ndesign: {random: {n: 2}}\n",
    "seed-negative": "fixed: {steps: 5, seed: -1}\n",
    "study-seed-negative": "seed: -1\nfixed: {steps: 5}\n",
    "batch-zero": "fixed: {steps: 5, batch_size: 0}\n",
    "steps-inf": "fixed: {steps: .inf}\n",
    "steps-nan": "fixed: {steps: .nan}\n",
    "warmup-over-steps": "fixed: {steps: 20, warmup_steps: 100}\n",
    "synthetic-huge": "fixed: {steps: 5, dataset: synthetic, synthetic_samples: 1000000000}\n",
    "momentum-one": "fixed: {steps: 5, momentum: 1}\n",
    "workers-zero": "fixed: {steps: 5, arch: ring, workers: 0}\n",
    "num-ps-zero": "fixed: {steps: 5, arch: ps, num_ps: 0}\n",
    "sync-every-zero": "fixed: {steps: 5, arch: ring, sync_every: 0}\n",
    "sync-every-async": "fixed: {steps: 5, arch: ps, sync: false}\nfactors: {sync_every: [1, 4]}\n",
    "timeout-nan": "timeout_s: .nan\nfixed: {steps: 5}\n",
    "timeout-negative": "timeout_s: -1\nfixed: {steps: 5}\n",
    "repetitions-zero": "repetitions: 0\nfixed: {steps: 5}\n",
    "design-unknown": "design: sobol\nfixed: {steps: 5}\n",
    "cluster-unknown": "cluster: moon\nfixed: {steps: 5}\n",
    "model-unknown": "fixed: {steps: 5, model: nosuchnet}\n",
    "model-dataset": "fixed: {steps: 5, model: charlm}\n",
    "epochs-and-steps": "fixed: {steps: 5, epochs: 1}\n",
    "duplicate-level": "fixed: {steps: 5}\nfactors: {lr: [0.1, 0.1]}\n",
    "empty-levels": "fixed: {steps: 5}\nfactors: {lr: []}\n",
    "unknown-setting": "fixed: {steps: 5, learning_rate: 0.1}\n",
    "reserved-setting": "fixed: {steps: 5, out: x.jsonl}\n",
    "bad-study-name": "study: 'a b'\nfixed: {steps: 5}\n",
    "python-missing": "python: /nonexistent/python\nfixed: {steps: 5}\ncluster: localhost\n",
    "python-not-a-program": "python: {ws}/records/norecord.jsonl\nfixed: {steps: 5}\n"
    "cluster: localhost\n",
    "python-a-folder": "python: {ws}\nfixed: {steps: 5}\ncluster: localhost\n",
    "python-without-archbench": "python: /bin/true\nfixed: {steps: 5}\ncluster: localhost\n",
    "bandwidth-on-localhost": "fixed: {steps: 5, arch: ring, bandwidth: 1gbit}\ncluster: localhost\n",
    "bandwidth-garbage": "fixed: {steps: 5, arch: ring, bandwidth: fast}\n",
    "powersgd-on-p2p": "fixed: {steps: 5, arch: p2p, compression: powersgd}\n",
    "compression-ratio-zero": "fixed: {steps: 5, arch: ring, compression: topk, compression_ratio: 0}\n",
    "gloo-with-mpirun": "fixed: {steps: 5, arch: ring, controller: gloo, launcher: mpirun}\n",
    "exclude-unknown-level": "fixed: {steps: 5}\nfactors: {lr: [0.1, 0.2]}\nexclude: [{lr: 0.3}]\n",
}

SWEEP_CASES = [_sweep(name.replace("-", " "), name) for name in SWEEP_SPECS] + [
    Case("sweep missing spec", [*CLI, "sweep", "{ws}/specs/nosuch.yaml"]),
    Case("sweep spec a folder", [*CLI, "sweep", "{ws}/specs"]),
    Case("sweep --only no '='", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--only", "arch"]),
    Case("sweep --only unknown", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--only", "colour=red"]),
    Case("sweep --only bad level", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--only", "lr=.nan"]),
    Case("sweep --cluster moon", [*CLI, "sweep", "{ws}/specs/ok.yaml", "--cluster", "moon"]),
]

REPORT_CASES = [
    Case("report missing path", [*CLI, "report", "{ws}/nosuch"]),
    Case("report empty folder", [*CLI, "report", "{ws}/empty"]),
    Case("report empty file", [*CLI, "report", "{ws}/records/empty.jsonl"]),
    Case("report no run record", [*CLI, "report", "{ws}/records/norecord.jsonl"]),
    Case("report garbage file", [*CLI, "report", "{ws}/records/garbage.jsonl"]),
    Case("report out is a file", [*CLI, "report", "{ws}/records", "--out", "{ws}/records/x.txt"]),
]

COMPARE_CASES = [
    Case("compare missing file", [*CLI, "compare", "{ws}/nosuch.jsonl"]),
    Case("compare no file", [*CLI, "compare"]),
    Case("compare empty file", [*CLI, "compare", "{ws}/records/empty.jsonl"]),
    Case("compare no run record", [*CLI, "compare", "{ws}/records/norecord.jsonl"]),
    Case("compare garbage file", [*CLI, "compare", "{ws}/records/garbage.jsonl"]),
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
]

CLUSTER_CASES = [
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
]

OTHER_CASES = [
    Case("unknown command", [*CLI, "explode"]),
    Case("no command", [*CLI]),
]

CASES = (
    TRAIN_CASES
    + SWEEP_CASES
    + REPORT_CASES
    + COMPARE_CASES
    + PREDICT_CASES
    + CLUSTER_CASES
    + OTHER_CASES
)


def prepare_workspace(ws: Path) -> None:
    """The damaged files the cases point at, each with exactly the problem its name says."""
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
    (specs / "ok.yaml").write_text("fixed: {steps: 5}\ncluster: localhost\n")
    for name, text in SWEEP_SPECS.items():
        (specs / f"{name}.yaml").write_text(text.replace("{ws}", str(ws)))


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
