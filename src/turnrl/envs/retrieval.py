"""Retrievers for search envs: BM25 (``bm25s``) and dense (``sentence-transformers``), cached.

A retriever indexes a list of texts once and answers ``search(query, k)`` with the indices of
the best texts and their scores, best first. :func:`get_retriever` builds one per corpus and
caches it in this process, keyed by the retriever kind, the model (dense) and a fingerprint
of the texts, so the many env instances a runner makes (one per episode) share one index::

    retriever = get_retriever("bm25", texts, corpus_key=sha256)  # default: fingerprint(texts)
    retriever.search("Ada Lovelace born", k=3)   # [(12, 4.1), (40, 1.3), (7, 0.9)]

``bm25``
    Okapi BM25 (Lucene variant, k1=1.5, b=0.75) from the ``bm25s`` package; lower-cased word
    tokens of two or more characters, English stop words removed, no stemming. Texts that
    share no word with the query (score 0) are not returned.
``dense``
    Cosine similarity of ``sentence-transformers`` embeddings (``pip install 'turnrl[dense]'``);
    ``model`` is a local model directory (works offline) or a Hugging Face model id. The
    model is loaded once per process and runs on the CPU unless ``device`` says otherwise.

Searches take a lock per retriever, so envs stepping in worker threads (``spec.slow_steps``)
can share one index safely.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

__all__ = [
    "RETRIEVER_KINDS",
    "BM25Retriever",
    "DenseRetriever",
    "Retriever",
    "RetrieverError",
    "RetrieverKind",
    "clear_retriever_cache",
    "fingerprint",
    "get_retriever",
    "index_builds",
]

RetrieverKind = Literal["bm25", "dense"]
RETRIEVER_KINDS: tuple[str, ...] = ("bm25", "dense")
CACHE_SIZE = 8  # indices kept per process (least recently used dropped first)
DENSE_INSTALL = "pip install 'turnrl[dense]' (sentence-transformers)"


class RetrieverError(ValueError):
    """A retriever that cannot be built: a missing package, a model that does not load."""


class Retriever(Protocol):
    """An index over a fixed list of texts."""

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The indices of the (at most) ``k`` best texts and their scores, best first."""
        ...


class BM25Retriever:
    """BM25 over ``texts`` with ``bm25s`` (see the module docstring for the tokenisation)."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.size = len(texts)
        self._index = bm25s.BM25()
        self._index.index(self._tokenize(list(texts)), show_progress=False)
        self._lock = threading.Lock()

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        return self._bm25s.tokenize(texts, stopwords="en", return_ids=False,
                                    show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        tokens = self._tokenize([query])
        if not tokens[0] or self.size == 0:
            return []
        with self._lock:
            docs, scores = self._index.retrieve(tokens, k=min(k, self.size),
                                                show_progress=False, n_threads=0)
        return [(int(doc), float(score)) for doc, score in zip(docs[0], scores[0], strict=True)
                if score > 0]


_MODELS: dict[tuple[str, str], tuple[Any, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()


def _load_sentence_transformer(model: str, device: str) -> tuple[Any, threading.Lock]:
    """The model (loaded once per process) and the lock that serialises its ``encode``."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise RetrieverError(
            f"dense retrieval needs the sentence-transformers package, which is not "
            f"installed ({exc}); {DENSE_INSTALL}, or use retriever='bm25'") from None
    key = (model, device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            local = Path(model).expanduser()
            looks_local = local.exists() or model.startswith((".", "/", "~"))
            if looks_local and not (local / "config.json").is_file() and not (
                    local / "modules.json").is_file():
                raise RetrieverError(
                    f"dense_model {model!r} is not a sentence-transformers model directory "
                    "(no modules.json or config.json there); pass the directory that "
                    "SentenceTransformer.save() wrote, or a Hugging Face model id")
            try:
                loaded = SentenceTransformer(str(local) if looks_local else model,
                                             device=device)
            except Exception as exc:  # a missing download, a broken directory
                raise RetrieverError(
                    f"cannot load dense_model {model!r} ({type(exc).__name__}: {exc}); pass "
                    "a local sentence-transformers model directory (it loads offline)"
                ) from exc
            _MODELS[key] = (loaded, threading.Lock())
        return _MODELS[key]


class DenseRetriever:
    """Cosine similarity of normalised ``sentence-transformers`` embeddings."""

    def __init__(self, texts: Sequence[str], model: str, *, device: str = "cpu",
                 batch_size: int = 64) -> None:
        self.model, self._lock = _load_sentence_transformer(model, device)
        self.size = len(texts)
        with self._lock:
            self._embeddings = self.model.encode(
                list(texts), batch_size=batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        if not query.strip() or self.size == 0:
            return []
        with self._lock:
            vector = self.model.encode([query], normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)[0]
        scores = self._embeddings @ vector
        best = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in best]


# --------------------------------------------------------------------------- the cache

_CACHE: OrderedDict[tuple[str, ...], Retriever] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_BUILDS: Counter[str] = Counter()


def fingerprint(texts: Sequence[str]) -> str:
    """sha256 of the texts (in order): the cache key of a corpus."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def get_retriever(kind: RetrieverKind, texts: Sequence[str], *, model: str | None = None,
                  device: str = "cpu", corpus_key: str | None = None) -> Retriever:
    """The cached retriever of ``kind`` over ``texts``, built on first use.

    Args:
        kind: ``"bm25"`` or ``"dense"``.
        texts: the documents, in the order their indices refer to.
        model: the sentence-transformers model (dense only).
        device: where the dense model runs.
        corpus_key: identifies ``texts`` in the cache, e.g. a precomputed :func:`fingerprint`
            (default: the fingerprint of ``texts``).

    Raises:
        RetrieverError: an unknown kind, a dense retriever without a model or package.
    """
    if kind not in RETRIEVER_KINDS:
        raise RetrieverError(f"retriever {kind!r} is not one of {RETRIEVER_KINDS}")
    if kind == "dense" and not model:
        raise RetrieverError("retriever='dense' needs dense_model=<a local sentence-transformers "
                             "model directory or a Hugging Face model id>")
    key = (kind, str(model or ""), device if kind == "dense" else "",
           corpus_key or fingerprint(texts))
    with _CACHE_LOCK:  # one build per corpus even when envs reset in parallel threads
        retriever = _CACHE.get(key)
        if retriever is None:
            retriever = (BM25Retriever(texts) if kind == "bm25"
                         else DenseRetriever(texts, str(model), device=device))
            _BUILDS[kind] += 1
            _CACHE[key] = retriever
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(key)
        return retriever


def index_builds(kind: RetrieverKind | None = None) -> int:
    """How many indices this process has built (of ``kind``, or of every kind)."""
    return _BUILDS[kind] if kind is not None else sum(_BUILDS.values())


def clear_retriever_cache() -> None:
    """Drop every cached index (loaded dense models stay loaded)."""
    with _CACHE_LOCK:
        _CACHE.clear()
