"""The word-level text workload: a corpus cut into words, windows of words -> the next word.

Tokens are runs of word characters (`\\w+`) and single punctuation marks, read as bytes so every
corpus tokenizes the same way on every machine. The vocabulary is the `vocab_size - 1` most
frequent tokens (ties broken by the token's bytes, so it is the same on every rank) plus id 0 for
every other token. Ids are in order of frequency, so the output classes are simply the first
`WORD_OUTPUT_CLASSES` ids: the model predicts the next word among the most frequent ones, id 0
standing for every rarer word. The input vocabulary (the embedding's rows) is what makes the
model sparse: a batch touches a small share of its rows, and the embedding holds most of the
parameters.

Every window remembers the document (source file) it came from, for the `contiguous` data
partition (`archbench.runtime.partition`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from archbench.common.errors import UsageError

TOKEN = re.compile(rb"\w+|[^\w\s]")
UNKNOWN_ID = 0
WORD_OUTPUT_CLASSES = 1024
MIN_WINDOWS = 16


@dataclass(frozen=True)
class WordCorpus:
    """Token ids of a corpus, document by document, and the vocabulary they index."""

    ids: np.ndarray  # int32, every document's tokens one after another
    document_of_token: np.ndarray  # int32, the document each token comes from
    vocabulary: tuple[bytes, ...]  # id -> token (id 0: every other token)
    distinct_tokens: int  # distinct tokens in the corpus, before the vocabulary's cut


def tokenize(documents: list[bytes], vocab_size: int) -> WordCorpus:
    """Ids of every token of `documents` in a vocabulary of `vocab_size` ids (>= 2)."""
    if vocab_size < 2:
        raise UsageError(
            f"--vocab-size must be at least 2 (one word and the unknown word), got {vocab_size}"
        )
    tokens = [TOKEN.findall(document) for document in documents]
    counts = Counter(token for document in tokens for token in document)
    if not counts:
        raise UsageError("text corpus holds no words")
    ranked = sorted(counts, key=lambda token: (-counts[token], token))[: vocab_size - 1]
    index = {token: position + 1 for position, token in enumerate(ranked)}
    ids = np.fromiter(
        (index.get(token, UNKNOWN_ID) for document in tokens for token in document),
        dtype=np.int32,
        count=sum(len(document) for document in tokens),
    )
    document_of_token = np.repeat(
        np.arange(len(tokens), dtype=np.int32), [len(document) for document in tokens]
    )
    return WordCorpus(ids, document_of_token, (b"", *ranked), len(counts))


@dataclass(frozen=True)
class WordWindows:
    """Windows of `seq_len` token ids (inputs), the next word's class (labels), and the document
    of each window."""

    x: np.ndarray
    y: np.ndarray
    documents: np.ndarray
    output_classes: int


def windows(corpus: WordCorpus, seq_len: int, vocab_size: int, source: str) -> WordWindows:
    """Non-overlapping windows of `seq_len` tokens, each labelled with the token after it (its
    id when among the `output_classes` most frequent, else 0)."""
    count = (len(corpus.ids) - 1) // seq_len
    if count < MIN_WINDOWS:
        raise UsageError(
            f"text corpus {source}: {len(corpus.ids)} words, too few for --seq-len {seq_len} "
            f"(needs at least {MIN_WINDOWS * seq_len + 1})"
        )
    starts = np.arange(count) * seq_len
    x = corpus.ids[starts[:, None] + np.arange(seq_len)]
    classes = min(WORD_OUTPUT_CLASSES, vocab_size)
    following = corpus.ids[starts + seq_len]
    y = np.where(following < classes, following, UNKNOWN_ID).astype(np.int32)
    return WordWindows(x, y, corpus.document_of_token[starts], classes)
