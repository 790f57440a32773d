"""`archbench report` on a tiny real study: every figure is written, and the computed tables
equal values computed here, independently, from the raw records."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import report_records
from conftest import REPO, launch_env
from record_files import read_records

FIGURES = (
    "throughput_scaling",
    "scaling_efficiency",
    "time_split",
    "time_to_accuracy",
    "main_effects_time",
    "main_effects_accuracy",
    "effect_ranking",
    "transfer",
)


@pytest.fixture(scope="session")
def real_study(tmp_path_factory) -> Path:
    return report_records.real_study(tmp_path_factory.mktemp("report-study"))


@pytest.fixture(scope="module")
def report_dir(real_study, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "report", str(real_study), "--out", str(out)],
        cwd=REPO,
        env=launch_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "report.md" in proc.stdout
    return out


@pytest.fixture(scope="module")
def ok_records(real_study) -> list[dict]:
    records = read_records(real_study / "results.jsonl")
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    return records


def grouped(records: list[dict], value) -> dict[tuple, list[float]]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for record in records:
        groups[report_records.key(record)].append(value(record))
    return groups


def table(report_dir: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(report_dir / "tables" / f"{name}.csv")


def test_every_figure_is_written_as_png_and_svg_and_inlined_in_the_html(report_dir):
    for stem in FIGURES:
        png = report_dir / "figures" / f"{stem}.png"
        svg = report_dir / "figures" / f"{stem}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", stem
        assert png.stat().st_size > 10_000, f"{stem}.png looks empty"
        assert "<svg" in svg.read_text()[:2000], stem
    html = (report_dir / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(FIGURES)
    markdown = (report_dir / "report.md").read_text()
    for stem in FIGURES:
        assert f"](figures/{stem}.png)" in markdown


def test_findings_come_first_and_skipped_parts_say_why(report_dir):
    markdown = (report_dir / "report.md").read_text()
    sections = markdown.split("\n## ")
    assert sections[1].startswith("The answer") and sections[2].startswith("Findings")
    findings = [line for line in sections[2].splitlines() if line.startswith("- ")]
    assert len(findings) >= 5
    assert any("single-process baseline" in line for line in findings)
    assert any("Spearman" in line for line in findings)
    skipped = markdown.split("## Skipped and why", 1)[1]
    # The study has no parameter-server run, so placement and sync mode cannot be drawn.
    assert "no successful parameter-server run" in skipped
    assert "internal error" not in markdown


def test_speedups_match_the_raw_records(report_dir, ok_records):
    throughput = grouped(ok_records, lambda r: r["timing"]["samples_per_s"])
    scaling = table(report_dir, "scaling")
    ring = scaling[scaling["arch"] == "ring"]
    assert sorted(ring["workload"]) == ["cnn", "mlp"]
    for _, row in ring.iterrows():
        model = row["workload"]
        expected = np.mean(throughput[(model, "ring", 32)]) / np.mean(
            throughput[(model, "single", 32)]
        )
        assert row["workers"] == 2 and row["batch_size"] == 32
        assert row["speedup"] == pytest.approx(expected, rel=1e-9)
        assert row["efficiency"] == pytest.approx(expected / 2, rel=1e-9)
        assert row["samples_per_s_std"] == pytest.approx(
            np.std(throughput[(model, "ring", 32)], ddof=1), rel=1e-9
        )
    # Each single-process configuration is its own baseline at its own per-worker batch.
    single = scaling[scaling["arch"] == "single"]
    assert len(single) == 4 and np.allclose(single["speedup"], 1.0)


def test_transfer_correlations_and_top_overlap_match_the_raw_records(report_dir, ok_records):
    # Configurations rank by time per epoch: the data set's samples at the median step's rate.
    for record in ok_records:
        timing = record["timing"]
        assert timing["epoch_s"] == pytest.approx(
            timing["samples_per_epoch"] / timing["samples_per_s"], rel=1e-12
        )
    times = {
        k: np.mean(v) for k, v in grouped(ok_records, lambda r: r["timing"]["epoch_s"]).items()
    }
    configs = [("single", 32), ("single", 64), ("ring", 32)]
    cnn = np.array([times[("cnn", *c)] for c in configs])
    mlp = np.array([times[("mlp", *c)] for c in configs])

    pair = table(report_dir, "transfer").iloc[0]
    assert (pair["workload_a"], pair["workload_b"], pair["matched"]) == ("cnn", "mlp", 3)
    assert pair["pearson_r"] == pytest.approx(np.corrcoef(cnn, mlp)[0, 1], abs=1e-9)
    rank_cnn = pd.Series(cnn).rank().to_numpy()
    rank_mlp = pd.Series(mlp).rank().to_numpy()
    assert pair["spearman_rho"] == pytest.approx(np.corrcoef(rank_cnn, rank_mlp)[0, 1], abs=1e-9)
    top_k = max(1, math.ceil(0.1 * len(configs)))
    top_cnn = set(np.argsort(cnn)[:top_k])
    top_mlp = set(np.argsort(mlp)[:top_k])
    assert pair["top_k"] == top_k
    assert pair["top_overlap"] == len(top_cnn & top_mlp)
    best_cnn, best_mlp = int(np.argmin(cnn)), int(np.argmin(mlp))
    assert pair["a_best_rank_in_b"] == 1 + int((mlp < mlp[best_cnn]).sum())
    assert pair["a_best_slowdown_in_b"] == pytest.approx(mlp[best_cnn] / mlp[best_mlp], rel=1e-9)
    assert pair["b_best_rank_in_a"] == 1 + int((cnn < cnn[best_mlp]).sum())
    assert pair["b_best_slowdown_in_a"] == pytest.approx(cnn[best_mlp] / cnn[best_cnn], rel=1e-9)

    best = table(report_dir, "best_config").set_index("workload")
    for model, values in (("cnn", cnn), ("mlp", mlp)):
        arch, batch = configs[int(np.argmin(values))]
        assert best.at[model, "config"] == f"arch={arch} batch_size={batch}"
        assert best.at[model, "epoch_s"] == pytest.approx(values.min(), rel=1e-9)


def test_time_to_target_matches_the_raw_records(report_dir, ok_records):
    reached = grouped(ok_records, lambda r: r["result"]["time_to_target_s"])
    ttt = table(report_dir, "time_to_target")
    assert set(zip(ttt["workload"], ttt["arch"], strict=True)) == {
        (m, a) for m in ("cnn", "mlp") for a in ("single", "ring")
    }
    for _, row in ttt.iterrows():
        arch, batch = row["config"].split()[0].split("=")[1], int(row["config"].split("=")[-1])
        times = [t for t in reached[(row["workload"], arch, batch)] if t is not None]
        assert row["reached"] == len(times) and row["n"] == 2
        if times:
            assert row["time_to_target_s"] == pytest.approx(np.mean(times), rel=1e-9)
        else:
            assert math.isnan(row["time_to_target_s"])


def test_effect_of_the_architecture_on_time_per_epoch_is_the_anova_eta_squared(
    report_dir, ok_records
):
    # Two workloads: each run's time per epoch is taken relative to its workload's mean.
    by_model: dict[str, list[float]] = defaultdict(list)
    for record in ok_records:
        by_model[record["config"]["model"]].append(record["timing"]["epoch_s"])
    y = np.array(
        [r["timing"]["epoch_s"] / np.mean(by_model[r["config"]["model"]]) for r in ok_records]
    )
    arch = np.array([r["config"]["arch"] for r in ok_records])
    between = sum((arch == a).sum() * (y[arch == a].mean() - y.mean()) ** 2 for a in set(arch))
    expected = between / ((y - y.mean()) ** 2).sum()
    ranking = table(report_dir, "effect_ranking")
    row = ranking[(ranking["response"] == "epoch_s") & (ranking["factor"] == "arch")].iloc[0]
    assert row["eta_sq"] == pytest.approx(expected, rel=1e-9)
    assert row["n"] == 12
    # The model is the workload, not a configuration factor: it is not ranked.
    assert "model" not in set(ranking["factor"])


def test_the_answer_names_the_fastest_candidate_of_the_raw_records(report_dir, ok_records):
    answer = table(report_dir, "answer")
    assert len(answer) >= 1
    for _, row in answer.iterrows():
        workers = int(row["workers"])
        means = {}
        for record in ok_records:
            if record["config"]["model"] != row["workload"]:
                continue
            # the study varies the per-worker batch: a setting compares runs at one batch
            if "batch_size" in answer and record["config"]["batch_size"] != row["batch_size"]:
                continue
            arch = record["config"]["arch"]
            if arch == "single":
                key = "one process"
            elif record["cluster"]["num_workers"] == workers:
                key = arch
            else:
                continue
            means.setdefault(key, []).append(record["timing"]["samples_per_s"])
        best = max(means, key=lambda name: np.mean(means[name]))
        assert row["fastest"] == best, (row, means)
        assert row["samples_per_s"] == pytest.approx(np.mean(means[best]), rel=1e-9)
