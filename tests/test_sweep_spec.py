"""Study specs: what loads, and every kind of bad spec refused with one line, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from archbench.common.errors import UsageError
from archbench.sweep.spec import NumericRange, load_spec

REPO = Path(__file__).resolve().parents[1]

GOOD = """
study: good
description: a spec with every section
seed: 7
repetitions: 2
order: design
timeout_s: 90
timeouts:
  - when: {model: cnn}
    timeout_s: 300
launch_retries: 3
launcher_args: [--mca, btl, "self,tcp"]
env: {TF_NUM_INTEROP_THREADS: 1}
cluster: {kind: localhost, slots: 6}
fixed: {dataset: fashion_mnist, steps: 50, batch_size: 32}
factors:
  arch: [single, ring, ps]
  model: [mlp, cnn]
  workers: [2, 4]
  sync: [sync, async]
design: full_factorial
exclude:
  - {arch: ps, workers: 4}
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_complete_spec_loads_with_typed_levels(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.name == "good"
    assert spec.results_dir == tmp_path / "good"
    assert spec.repetitions == 2 and spec.seed == 7 and spec.order == "design"
    assert spec.factors["sync"] == [True, False]  # sync/async become the --sync/--async switch
    assert spec.factors["workers"] == [2, 4]
    assert spec.cluster.kind == "localhost" and spec.cluster.slots == 6
    assert spec.env == {"TF_NUM_INTEROP_THREADS": "1"}
    assert spec.launcher_args == ["--mca", "btl", "self,tcp"]
    assert spec.timeout_for({"model": "cnn"}) == 300
    assert spec.timeout_for({"model": "mlp"}) == 90
    assert spec.launch_retries == 3
    assert spec.exclude == [{"arch": "ps", "workers": 4}]


def test_ranges_are_allowed_for_numeric_factors_in_sampling_designs(tmp_path):
    spec = load_spec(
        write(
            tmp_path,
            """
            factors:
              lr: {min: 0.001, max: 0.1, log: true}
              batch_size: [16, 32, 64]
            design: {latin_hypercube: {n: 5}}
            """,
        )
    )
    assert spec.factors["lr"] == NumericRange(0.001, 0.1, log=True)
    assert spec.design.kind == "latin_hypercube" and spec.design.n == 5
    assert spec.name == "study"  # defaults to the file name
    assert spec.launch_retries == 2  # the default


BAD_SPECS = [
    ("factors: {colour: [red]}", "unknown setting 'colour'"),
    ("factors: {batchsize: [16]}", "did you mean 'batch_size'"),
    ("factors: {arch: [single, butterfly]}", "arch: must be one of single, ring, p2p, ps"),
    ("factors: {model: [mlp, nosuchnet]}", "model: unknown model 'nosuchnet'"),
    ("factors: {compression: [none, fp8]}", "compression: must be one of none, fp16"),
    ("factors: {batch_size: [32, 0]}", "batch_size: must be >= 1"),
    ("factors: {lr: [0.1, -1]}", "lr: must be > 0"),
    ("factors: {workers: [2.5]}", "workers: must be an integer"),
    ("factors: {bandwidth: [fast]}", "bandwidth: must be a rate like 100mbit"),
    ("factors: {placement: [sideways]}", "placement: must be one of packed, spread"),
    ("factors: {sync: [maybe]}", "sync: must be true or false"),
    ("factors: {lr: []}", "give a non-empty list of levels"),
    ("factors: {lr: [0.1, 0.1]}", "level 0.1 is listed twice"),
    ("factors: {out: [x.jsonl]}", "set by the sweep for every run"),
    ("fixed: {lr: 0.1}\nfactors: {lr: [0.2]}", "'lr' is both fixed and a factor"),
    ("fixed: {steps: 5, epochs: 1}", "sets both epochs and steps"),
    ("factors: {lr: {min: 0.1, max: 0.01}}", "min (0.1) must be below max (0.01)"),
    ("factors: {model: {min: 1, max: 2}}", "a min/max range needs a numeric setting"),
    ("factors: {lr: {min: 0.01, max: 0.1}}\ndesign: full_factorial", "is a range; list its levels"),
    ("factors: {lr: [0.1]}\ndesign: {random: {n: 0}}", "n must be an integer in 1..10,000"),
    (
        "factors: {model: [mlp, cnn]}\ndesign: {latin_hypercube: {n: 3}}",
        "needs at least one numeric factor",
    ),
    ("factors: {lr: [0.1]}\ndesign: factorial", "design 'factorial' is not one of"),
    ("factors: {lr: [0.1, 0.2]}\ndesign: {one_at_a_time: {base: {lr: 0.3}}}", "base level 0.3"),
    ("factors: {lr: [0.1]}\nexclude: [{lr: 0.5}]", "lr=0.5 is not one of the factor's levels"),
    ("repetitions: 0", "repetitions must be an integer in 1..1,000"),
    ("timeout_s: -5", "timeout_s must be a positive number"),
    ("launch_retries: -1", "launch_retries must be an integer in 0..10, got -1"),
    ("launch_retries: twice", "launch_retries must be an integer in 0..10, got 'twice'"),
    ("cluster: {kind: cloud}", "cluster: kind must be one of"),
    ("cluster: {kind: localhost, slots: 0}", "slots must be an integer in 1..1,024"),
    ("order: sorted", "order must be one of random, blocked, design"),
    ("env: {1BAD: x}", "is not an environment variable name"),
    ("factorz: {lr: [0.1]}", "unknown key 'factorz'"),
    ("study: 'bad name'", "study name 'bad name'"),
    ("factors: [lr]", "factors must map settings to lists of levels"),
    ("- just a list", "a study spec is a mapping"),
    ("factors: {lr: [0.1\n", "not valid YAML"),
    # the spec is input, not code; sizes have limits (issue 27)
    ("fixed: {steps: 10}\nfixed: {steps: 20}", "key 'fixed' is given twice"),
    ('study: "evil\\n"', "study name 'evil\\n'"),
    ("repetitions: 1000000000", "repetitions must be an integer in 1..1,000"),
    ("factors: {lr: {min: 0.1, max: 1}}\ndesign: {random: {n: 1000000000}}", "1..10,000"),
    ("factors: {lr: [0.1, 0.2]}\ndesign: {latin_hypercube: {n: 10001}}", "1..10,000"),
    ("cluster: {kind: emulated, nodes: 1000}", "nodes must be an integer in 1..64"),
    ("cluster: {kind: localhost, slots: 100000}", "slots must be an integer in 1..1,024"),
    ("fixed: {extra_args: [--out, /tmp/elsewhere.jsonl]}", "must not hold --out"),
    ("fixed: {extra_args: [--ou, /tmp/x]}", "--ou (taken for --out)"),
    ("factors: {extra_args: [[], [--lr, '1']]}", "give the setting lr"),
    ("launcher_args: [--mca, plm_rsh_agent, /tmp/x.sh]", "MCA parameter plm_rsh_agent"),
    ("launcher_args: [--output-filename, /tmp/out]", "'--output-filename' is not an option"),
    ("launcher_args: [-x, LD_PRELOAD=/tmp/x.so]", "LD_PRELOAD is not a variable a study may set"),
    ("env: {LD_PRELOAD: /tmp/x.so}", "LD_PRELOAD is not a variable a study may set"),
    ("env: {PYTHONPATH: /tmp}", "PYTHONPATH is not a variable a study may set"),
    ("env: {HOROVOD_TIMELINE: /tmp/t.json}", "HOROVOD_TIMELINE is not a variable"),
    ("python: /bin/sh", "is not a Python interpreter"),
    ('python: "python3\\n"', "holds a control character"),
    ("factors: {seed: " + str(list(range(1001))) + "}", "a factor has at most 1,000"),
]


@pytest.mark.parametrize("text,message", BAD_SPECS, ids=[m for _, m in BAD_SPECS])
def test_bad_specs_name_the_problem(tmp_path, text, message):
    with pytest.raises(UsageError) as error:
        load_spec(write(tmp_path, text))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


COMBINATIONS = [
    # more ranks than slots on a one-host cluster
    (
        "cluster: {kind: localhost, slots: 2}\nfactors: {arch: [ring], workers: [2, 3]}",
        "3 ranks but the localhost cluster has 2 slots",
    ),
    # ps: world size is workers + num_ps
    (
        "cluster: {kind: localhost, slots: 4}\nfixed: {arch: ps, workers: 3, num_ps: 2}",
        "5 ranks but the localhost cluster has 4 slots",
    ),
    (
        "factors: {arch: [ring], bandwidth: [100mbit]}\ncluster: localhost",
        "needs the emulated cluster",
    ),
    (
        "fixed: {arch: ring, controller: gloo, launcher: mpirun}\ncluster: localhost",
        "controller gloo needs launcher horovodrun",
    ),
    ("factors: {model: [mlp, charlm]}\ncluster: localhost", "charlm goes with --dataset text"),
    (
        "fixed: {steps: 6}\nfactors: {epochs: [1, 2]}\ncluster: localhost",
        "sets both epochs and steps",
    ),
    (
        "fixed: {arch: ring, placement: /nonexistent/hosts.txt}\ncluster: localhost",
        "hostfile /nonexistent/hosts.txt",
    ),
    (
        "factors: {lr: [0.1, 0.2]}\nexclude: [{lr: 0.1}, {lr: 0.2}]\ncluster: localhost",
        "leaves no configuration to run",
    ),
]


@pytest.mark.parametrize("text,message", COMBINATIONS, ids=[m for _, m in COMBINATIONS])
def test_impossible_combinations_stop_the_sweep_before_anything_starts(tmp_path, text, message):
    spec_path = write(tmp_path, "fixed: {steps: 6}\n" + text if "fixed:" not in text else text)
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert message in lines[0]
    assert not (tmp_path / "study").exists(), "a refused study must write nothing"


def test_a_bad_spec_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    spec_path = write(tmp_path, "factors: {arch: [single, quantum]}")
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec_path), "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "arch: must be one of" in proc.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(tmp_path / "nope.yaml")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "no such study spec" in missing.stderr


@pytest.mark.parametrize(
    "checked_in", sorted((REPO / "runs").glob("*.yaml")), ids=lambda path: path.stem
)
def test_every_checked_in_study_plans_its_runs(checked_in, tmp_path):
    """A study the README points users to must still plan with today's settings (a copy, so
    nothing lands beside the real one)."""
    spec_path = tmp_path / checked_in.name
    spec_path.write_text(checked_in.read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec_path), "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    planned = [line for line in proc.stderr.splitlines() if " runs on " in line]
    runs = [line for line in proc.stdout.splitlines() if "-m archbench.train" in line]
    assert len(planned) == 1 and f"= {len(runs)} runs" in planned[0], proc.stderr
    assert not (tmp_path / checked_in.stem).exists(), "--dry-run must write nothing"


def test_a_bare_on_or_off_is_the_setting_s_level_not_a_boolean(tmp_path):
    # YAML reads `on`/`off` as true/false: a setting whose levels are on and off takes them back
    spec = load_spec(write(tmp_path, "factors: {stop_sampler: [on, off], error_feedback: [off]}"))
    assert spec.factors["stop_sampler"] == ["on", "off"]
    assert spec.factors["error_feedback"] == ["off"]
