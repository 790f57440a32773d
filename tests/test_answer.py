"""The answer the report opens with: worked by hand on records with known throughputs, and the
README's table checked against what the command prints on the demo's checked-in records."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from conftest import REPO, launch_env
from record_files import timed_record, write_records

from archbench.analysis.answer import answer_markdown, answer_table
from archbench.analysis.load import load_study


def _runs(name: str, arch: str, workers: int, rates: list[float], **more) -> list[dict]:
    return [
        timed_record(f"{name}-{k}", arch, workers, rate, **more) for k, rate in enumerate(rates)
    ]


def test_the_answer_names_the_fastest_by_how_much_and_how_sure(tmp_path: Path) -> None:
    records = [
        *_runs("single", "single", 1, [1000, 1010, 990]),
        # 2 workers: ring clearly first, p2p next; one process slower than both
        *_runs("ring2", "ring", 2, [1800, 1810, 1790]),
        *_runs("p2p2", "p2p", 2, [1500, 1510, 1490]),
        # 4 workers: ring and p2p within each other's spread; one process far behind
        *_runs("ring4", "ring", 4, [2600, 3000, 2200]),
        *_runs("p2p4", "p2p", 4, [2500, 2900, 2300]),
        # the same configurations on another model, slower: never mixed with the first's
        *_runs("cnn-ring2", "ring", 2, [100, 101, 99], model="cnn"),
        *_runs("cnn-single", "single", 1, [200, 201, 199], model="cnn"),
    ]
    study = load_study(write_records(tmp_path / "results.jsonl", records))
    table = answer_table(study).set_index(["workload", "workers"])
    two = table.loc[("mlp", 2)]
    assert (two["fastest"], two["next"], two["verdict"]) == ("ring", "p2p", "sure")
    assert abs(two["ratio"] - 1800 / 1500) < 1e-9 and two["ci_low"] > 1
    assert abs(two["samples_per_s"] - 1800) < 1e-9
    four = table.loc[("mlp", 4)]
    assert four["fastest"] == "ring" and four["verdict"] == "too close to call"
    assert four["ci_low"] < 1 < four["ci_high"]
    cnn = table.loc[("cnn", 2)]
    assert (cnn["fastest"], cnn["next"], cnn["verdict"]) == ("one process", "ring", "sure")
    assert abs(cnn["ratio"] - 2.0) < 1e-9
    text = answer_markdown(answer_table(study))
    assert "| mlp | 2 | ring | 1,800 | 1.20× [" in text


def test_a_setting_with_one_candidate_is_not_an_answer(tmp_path: Path) -> None:
    records = _runs("ring2", "ring", 2, [1800, 1810])
    study = load_study(write_records(tmp_path / "results.jsonl", records))
    assert answer_table(study).empty
    assert answer_markdown(answer_table(study)).startswith("No setting of this study")


def test_the_readme_shows_what_the_command_prints_on_the_demos_records(tmp_path: Path) -> None:
    records = tmp_path / "results.jsonl"
    records.write_bytes(gzip.decompress((REPO / "docs" / "demo-results.jsonl.gz").read_bytes()))
    printed = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "report", str(records), "--answer"],
        cwd=REPO, env=launch_env(), capture_output=True, text=True, timeout=300, check=True,
    ).stdout.strip()  # fmt: skip
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- answer:")
    shown = readme[readme.index("\n", start) + 1 : readme.index("<!-- end of answer -->")].strip()
    assert shown == printed, "README.md's answer table is stale: paste what the command prints"
    assert not any(path.name != "results.jsonl" for path in tmp_path.iterdir())  # wrote nothing
