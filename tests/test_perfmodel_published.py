"""The GPU-server terms of the ring (devices per host, hierarchical, per-hop latencies),
pipelined fused buffers and the layer-order overlap schedule behave as their physics says, and
`archbench model published` prints a row per published point."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from archbench.cli import main
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.predictor import ModelParams, StepConfig, predict_step
from archbench.perfmodel.optimize import published

M = 100e6  # bytes
ALPHA, BETA = 10e-6, 8 / 25e9
INTER = F.LinkCost(ALPHA, BETA)
INTRA = F.LinkCost(5e-6, 8 / 126e9)


@pytest.mark.parametrize("algorithm", F.ALLREDUCE_ALGORITHMS)
def test_one_device_per_host_is_the_flat_ring(algorithm: str) -> None:
    for w in (2, 7, 64):
        parts = F.allreduce_on_hosts_parts(M, w, 1, INTER, INTRA, algorithm)
        assert sum(parts.values()) == pytest.approx(F.ring_allreduce_s(M, w, ALPHA, BETA))


def test_ring_through_hosts_pays_each_hop_once_and_the_slower_link() -> None:
    # W = 8 on H = 2 hosts of 4: 2(H-1) = 2 network hops, 2(W-1) - 2 = 12 hops inside a host
    parts = F.allreduce_on_hosts_parts(M, 8, 4, INTER, INTRA, F.RING, call_s=1e-6)
    assert parts[F.LATENCY] == pytest.approx(1e-6 + 2 * ALPHA + 12 * 5e-6)
    assert parts[F.LINK] == pytest.approx(2 * 7 / 8 * M * BETA)
    hier = F.allreduce_on_hosts_parts(M, 8, 4, INTER, INTRA, F.HIERARCHICAL)
    assert hier[F.LATENCY] == pytest.approx(2 * 3 * 5e-6 + 2 * 1 * ALPHA)
    assert hier[F.LINK] == pytest.approx(2 * 3 / 4 * M * INTRA.beta_s_per_byte + M * BETA)


def test_more_devices_per_host_fewer_inter_host_bytes_and_latency() -> None:
    w = 64
    nic = [F.inter_host_bytes_per_host(M, w, g, F.HIERARCHICAL) for g in (1, 2, 4, 8)]
    assert nic == sorted(nic, reverse=True) and nic[0] > nic[-1]
    lat = [F.allreduce_on_hosts_parts(M, w, g, INTER, INTRA)[F.LATENCY] for g in (1, 4, 8)]
    assert lat == sorted(lat, reverse=True)
    # one host: nothing crosses a NIC
    assert F.inter_host_bytes_per_host(M, 8, 8) == 0.0


def test_buffer_chain_in_turn_and_pipelined() -> None:
    transfers = [4e-3, 4e-3, 1e-3]
    assert F.buffer_chain_s(1e-3, transfers, pipelined=False) == pytest.approx(12e-3)
    # L + max(B1, L) + max(B2, L) + B3 = 1 + 4 + 4 + 1 ms
    assert F.buffer_chain_s(1e-3, transfers, pipelined=True) == pytest.approx(10e-3)
    assert F.buffer_chain_s(5e-3, [1e-3], pipelined=True) == pytest.approx(6e-3)
    # a latency longer than the transfers: it is paid once per buffer either way
    assert F.buffer_chain_s(5e-3, [1e-3, 1e-3], pipelined=True) == pytest.approx(11e-3)
    assert F.fused_buffer_bytes(150.0, 64.0) == [64.0, 64.0, 22.0]


def test_backward_schedule_hides_what_is_ready_early() -> None:
    # two layers of equal multiply-adds: the last layer's gradient is ready half-way through
    # the backward pass, the first's at its end
    ready = F.gradient_ready_s([1.0, 1.0], 0.3, 2 / 3)
    assert ready == pytest.approx([0.3, 0.2])
    one = F.backward_schedule([0.3], [1e6], 64e6, 1e-3, 1e-8)
    assert one.end_s == pytest.approx(0.3 + 1e-3 + 1e-2) and one.calls == 1
    early = F.backward_schedule(ready, [5e6, 5e6], 64e6, 1e-3, 1e-8)
    # the second layer's 50 ms run from 0.2 s to 0.251 s; the first's from 0.3 s
    assert early.calls == 2
    assert early.end_s == pytest.approx(0.3 + 1e-3 + 5e-2)
    # ready together: fused into one call, one latency
    together = F.backward_schedule([0.3, 0.3], [5e6, 5e6], 64e6, 1e-3, 1e-8)
    assert together.calls == 1 and together.end_s == pytest.approx(0.3 + 1e-3 + 0.1)
    # the threshold splits them
    split = F.backward_schedule([0.3, 0.3], [5e6, 5e6], 6e6, 1e-3, 1e-8)
    assert split.calls == 2 and split.end_s == pytest.approx(0.3 + 2e-3 + 0.1)
    piped = F.backward_schedule([0.3, 0.3], [5e6, 5e6], 6e6, 1e-3, 1e-8, pipelined=True)
    assert piped.end_s == pytest.approx(0.3 + 1e-3 + 0.1)


def _ring(workers: int, g: int = 1, **extra) -> StepConfig:
    hosts = tuple(f"node{i // g + 1}" for i in range(workers))
    return StepConfig(
        arch="ring", model="m", batch_size=32, param_bytes=M,
        placement=F.Placement(hosts, tuple([F.WORKER] * workers)), bandwidth_bits=25e9,
        variable_bytes=(M / 2, M / 2), devices_per_host=g, **extra,
    )  # fmt: skip


PARAMS = ModelParams(compute={"m": ComputeLine(fixed_s=0.3, per_sample_s=0.0)})
CALIB = Calibration(inter=F.LinkCost(ALPHA, 0.0), intra=INTRA)


def test_the_defaults_price_the_ring_as_before() -> None:
    # one worker per host, fused buffers in turn, no overlap: compute + the closed form
    for w in (2, 16):
        step = predict_step(_ring(w, fusion_threshold_mb=64.0), PARAMS, CALIB).step_s
        buffers = F.fusion_buffers(M, 64 * 1024 * 1024)
        assert step == pytest.approx(0.3 + F.ring_allreduce_s(M, w, ALPHA, BETA, buffers=buffers))


def test_overlap_and_devices_per_host_only_shorten_the_step() -> None:
    flops = (1.0, 1.0)
    for w in (8, 64):
        plain = predict_step(_ring(w), PARAMS, CALIB).step_s
        hosts = predict_step(_ring(w, 4, call_s=1e-5), PARAMS, CALIB).step_s
        overlapped = predict_step(
            _ring(w, 4, call_s=1e-5, overlap_schedule="backward", variable_flops=flops),
            PARAMS, CALIB,
        ).step_s  # fmt: skip
        assert 0.3 < overlapped <= hosts
        assert hosts < plain  # fewer network hops, one ring edge per NIC


def test_efficiency_falls_with_workers() -> None:
    shape = published.ModelShape(sizes=(M / 2, M / 2), flops=(3.0, 1.0))
    work = published.HOROVOD_CLUSTER.workloads[0]
    for step in range(len(published.HOROVOD_TERMS)):
        eff = [
            published.horovod_efficiency(published.HOROVOD_CLUSTER, work, shape, w, step)
            for w in (8, 64, 512)
        ]
        assert eff == sorted(eff, reverse=True), step
        assert all(0 < e <= 1 for e in eff)


def _fake_shapes(monkeypatch) -> None:
    def shape_of(model: str, shape) -> published.ModelShape:
        return published.ModelShape(sizes=(40e6, 60e6, 2e6), flops=(5.0, 1.0, 1.0))

    def plan(model, shape, classes, servers, sharding):
        return ([102e6 / servers] * servers, [3] * servers)

    monkeypatch.setattr(published, "model_shape", shape_of)
    monkeypatch.setattr(published, "ps_plan", plan)


def test_the_per_variable_what_if_hides_only_what_the_backward_pass_can(monkeypatch) -> None:
    _fake_shapes(monkeypatch)
    work = published.PS_CLUSTER.workloads[0]
    shape = published.model_shape(work.model, work.shape)
    for workers in (8, 16, 64):
        as_run, hidden = (
            published.ps_efficiency(published.PS_CLUSTER, work, shape, workers, step)
            for step in (1, 2)
        )
        assert as_run < hidden <= 1.0, workers
    # a pass of 0.1 s: the exchange outlasts the backward pass, and the rest is exposed
    slow = replace(work, images_per_s=work.batch / 0.1)
    assert published.ps_efficiency(published.PS_CLUSTER, slow, shape, 64, 2) < 1.0


def test_published_prints_a_row_per_published_point(monkeypatch, capsys) -> None:
    _fake_shapes(monkeypatch)
    assert main(["model", "published"]) == 0
    out = capsys.readouterr().out
    points = [
        (c.name, w.model, n) for c in published.CLUSTERS for w in c.workloads for n in w.published
    ]
    assert len(points) == 18
    for name, model, n in points:
        assert f"| {name} | {model} | {n} |" in out
    table = out.split("Ablation")[0]
    assert table.count("| Horovod,") + table.count("| TensorFlow PS,") == len(points)
    for term in (*published.HOROVOD_TERMS, *published.PS_TERMS):
        assert term.label in out
    assert "--devices-per-host 4" in out


def test_whatif_takes_the_cluster_flags(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    base = ["model", "whatif", "--models", "mlp", "--dataset", "fashion_mnist",
            "--compute-ms", "5", "--workers", "8,64", "--bandwidths", "1gbit"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    before = capsys.readouterr().out
    assert main([*base, "--devices-per-host", "4", "--intra-host-bandwidth", "126gbit",
                 "--latency", "5us", "--overlap", "backward", "--pipeline-buffers",
                 "--out", str(tmp_path / "b")]) == 0  # fmt: skip
    after = capsys.readouterr().out
    assert "4 workers per host; allreduce: ring" in after
    assert "between hosts: 5 us per message" in after
    ring_before = next(line for line in before.splitlines() if line.strip().startswith("ring"))
    ring_after = next(line for line in after.splitlines() if line.strip().startswith("ring"))
    assert ring_before != ring_after
    assert main([*base, "--overlap", "2", "--out", str(tmp_path / "c")]) == 2
