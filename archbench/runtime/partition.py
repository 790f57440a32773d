"""Partitioning a sparse model's work: samples among workers, embedding rows among servers.

The research notes pose it as a partition of the bipartite sample-word graph (each training
sample joined to the words it holds), solved in two steps: partition the data first, then place
each parameter where it is used. Both steps are settings (`archbench.runtime.settings`):

`--data-partition` (which samples each worker trains on):
- `random`: the global shuffle of the sync semantics (`archbench.workloads.data.BatchPlan`), every epoch a
  new seeded order cut into W slices per step; the equivalence oracle holds only here;
- `contiguous`: the training windows in corpus order (document after document) cut into W runs of
  equal length, so a worker sees whole source files;
- `graph`: METIS (pymetis, multilevel k-way) cuts the sample-word graph into W parts of about
  equal sample counts while cutting few sample-word edges, so each worker's samples share words.
  Words in more than `HUB_SHARE` of the samples (punctuation, `self`) join everything and are
  left out of the graph: every part needs them anyway.
With `contiguous` and `graph` a worker keeps its samples for the whole run, visiting them in a
new seeded order each epoch; an epoch is the smallest part's length in steps.

`--param-partition` (which server holds which embedding row, `ps` with sparse exchange):
- `range`: the shard plan's contiguous row ranges (`archbench.ps.sharding`);
- `round-robin`: row r on server r mod K; `hash`: on a multiplicative hash of r mod K;
- `by-use`: each row on the server paired with the worker whose part uses it most (server
  k mod K for worker k; rows no part uses go round-robin), so with a server beside each worker
  most of a worker's row traffic stays on its host.

Each partition is computed by every worker from the same data and seed (METIS is seeded), so the
workers agree without a message; the time it takes is measured and recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

HUB_SHARE = 0.1
METIS_SEED = 1
HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash


@dataclass(frozen=True, eq=False)
class DataPartition:
    method: str
    parts: tuple[np.ndarray, ...] | None  # per worker, its training sample indices (None: random)
    seconds: float  # the time the partitioning took
    edge_cut: int | None = None  # graph: sample-word edges METIS cut

    def record(self, data, batch_size: int) -> dict:
        """What the run record says about the data partition."""
        facts: dict = {
            "data_partition": self.method,
            "data_partition_s": round(self.seconds, 6),
            "equivalence_oracle": "applies (the global shuffle of the sync semantics)"
            if self.parts is None
            else "does not apply: each worker trains on its own part of the samples, so the "
            "run is not the single-process run with batch W x b",
        }
        if self.parts is not None:
            facts["samples_per_worker"] = [int(len(p)) for p in self.parts]
            facts["distinct_words_per_worker"] = [
                int(len(np.unique(data.x_train[p]))) for p in self.parts
            ]
            facts["edge_cut"] = self.edge_cut
        return facts


_CACHE: dict[tuple, DataPartition] = {}


def data_partition(method: str, data, workers: int, seed: int) -> DataPartition:
    """The data partition of `data` among `workers` (computed once per process)."""
    key = (id(data), method, workers, seed)
    if key not in _CACHE:
        started = time.perf_counter()
        cut = None
        if method == "random":
            parts = None
        elif method == "contiguous":
            parts = tuple(np.array_split(np.arange(data.train_size), workers))
        elif method == "graph":
            parts, cut = _graph_parts(data.x_train, data.vocab_size, workers)
        else:
            raise ValueError(f"unknown data partition {method!r}")
        _CACHE[key] = DataPartition(method, parts, time.perf_counter() - started, cut)
    return _CACHE[key]


def sample_word_graph(x: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The bipartite sample-word graph in CSR form (xadj, adjncy): vertices 0..N-1 are samples,
    N + w is word w; a sample is joined to each distinct word it holds, hub words excepted.
    Also returns the number of word vertices kept in the graph (all words keep a vertex)."""
    samples = len(x)
    pairs = np.unique(x.astype(np.int64) + np.arange(samples)[:, None] * vocab_size)
    sample_of, word_of = np.divmod(pairs, vocab_size)
    spread = np.bincount(word_of, minlength=vocab_size)
    keep = spread[word_of] <= max(1, HUB_SHARE * samples)
    sample_of, word_of = sample_of[keep], word_of[keep]
    # both directions of every edge, grouped by vertex
    sources = np.concatenate([sample_of, samples + word_of])
    targets = np.concatenate([samples + word_of, sample_of])
    order = np.argsort(sources, kind="stable")
    degree = np.bincount(sources, minlength=samples + vocab_size)
    xadj = np.concatenate(([0], np.cumsum(degree)))
    return xadj, targets[order], int(np.count_nonzero(spread[spread > 0]))


def _graph_parts(x: np.ndarray, vocab_size: int, workers: int):
    """METIS k-way cut of the sample-word graph; samples weigh 1 and words 0, so the parts hold
    about equal sample counts."""
    if workers == 1:
        return (np.arange(len(x)),), 0
    import pymetis

    xadj, adjncy, _ = sample_word_graph(x, vocab_size)
    weights = np.concatenate([np.ones(len(x), dtype=np.int64), np.zeros(vocab_size, np.int64)])
    options = pymetis.Options(seed=METIS_SEED)
    adjacency = pymetis.CSRAdjacency(xadj, adjncy)
    cut, membership = pymetis.part_graph(workers, adjacency, vweights=weights, options=options)
    membership = np.asarray(membership[: len(x)])
    return tuple(np.flatnonzero(membership == part) for part in range(workers)), int(cut)


# --- parameter placement ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RowPlacement:
    method: str
    servers: np.ndarray  # server of each row
    seconds: float

    def positions(self) -> np.ndarray:
        """The stored position of each row: rows grouped by server, in row order within one."""
        order = np.argsort(self.servers, kind="stable")
        positions = np.empty_like(order)
        positions[order] = np.arange(len(order))
        return positions

    def rows_per_server(self, num_ps: int) -> list[int]:
        return np.bincount(self.servers, minlength=num_ps).tolist()

    def record(self, num_ps: int) -> dict:
        return {
            "param_partition": self.method,
            "param_partition_s": round(self.seconds, 6),
            "rows_per_server": self.rows_per_server(num_ps),
        }


def place_rows(
    method: str, rows: int, num_ps: int, data=None, partition: DataPartition | None = None
) -> RowPlacement:
    """The server of each of `rows` embedding rows (`round-robin`, `hash`, `by-use`)."""
    started = time.perf_counter()
    index = np.arange(rows, dtype=np.int64)
    if method == "round-robin":
        servers = index % num_ps
    elif method == "hash":
        servers = (index * HASH_MULTIPLIER % 2**32) % num_ps
    elif method == "by-use":
        if partition is None or partition.parts is None:
            raise ValueError("by-use placement needs a data partition other than random")
        use = np.stack(
            [
                np.bincount(data.x_train[part].reshape(-1), minlength=rows)
                for part in partition.parts
            ]
        )
        servers = np.where(use.max(axis=0) > 0, use.argmax(axis=0) % num_ps, index % num_ps)
    else:
        raise ValueError(f"unknown parameter partition {method!r}")
    return RowPlacement(method, servers.astype(np.int64), time.perf_counter() - started)
