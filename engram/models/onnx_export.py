"""The ONNX graph's making: the torch model's transformer with mean pooling and normalisation exported
as one graph, the cache file it is kept in and that file's key (the model's files and the versions
of the packages that shape the graph), written whole under a lock so that one process exports it.
engram.models.onnx_runtime runs it."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import numpy as np

# Bump ONNX_FORMAT when the exported graph or its manifest changes: it is part of the cache key.
ONNX_FORMAT = 2
ONNX_OPSET = 17
# Libraries whose versions shape the exported graph or the tokens fed to it: a new version of any
# of them makes the checked graph untrusted (a new cache key), so it is exported and checked again.
# Read from the installed metadata, so computing the key imports none of them.
KEY_PACKAGES = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnxruntime", "onnx")


class Reference(Protocol):
    """What exporting the graph and checking it need of the torch model it reproduces
    (engram.models.embedding.TorchModel)."""

    model: Any  # the sentence-transformers model
    torch: Any  # the torch module
    lock: threading.Lock  # held while torch runs: its thread count is global
    dim: int

    def tokenize(self, texts: list[str]) -> dict: ...

    def run(self, features: dict, large: bool = False) -> np.ndarray: ...


def export_graph(reference: Reference, names: tuple[str, ...]) -> bytes:
    """The transformer plus mean pooling and L2 normalisation as one ONNX graph, fed `names`."""
    torch = reference.torch
    # Traced with padding, so the graph keeps the attention-mask path.
    example = reference.tokenize(["a", "an example sentence, longer than the first one"])
    module = mean_pooled(torch, reference.model[0].auto_model, names).eval()
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["embedding"] = {0: "batch"}
    buf = io.BytesIO()
    with reference.lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings about shape-dependent branches
        torch.onnx.export(
            module,
            tuple(example[n] for n in names),
            buf,
            input_names=list(names),
            output_names=["embedding"],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    return buf.getvalue()


def graph_path(name: str, path: str, cache_dir: Path | None) -> Path | None:
    """Cache file named from the model and a key of its weights (size, mtime) and of the
    versions that shape the graph; None when there is no folder or no local model."""
    root = Path(path)
    if cache_dir is None or not root.is_dir():
        return None
    files = []
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if (
            f.is_file()
            and f.suffix in (".safetensors", ".bin", ".json", ".pt", ".pth", ".txt", ".model")
            and not {"onnx", "openvino"} & set(rel.parts[:-1])
        ):
            st = f.stat()
            files.append([str(rel), st.st_size, st.st_mtime_ns])
    key = json.dumps([ONNX_FORMAT, ONNX_OPSET, str(root.resolve()), files, installed_versions()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._]+", "_", name).strip("_.")[-80:] or "model"
    return Path(cache_dir) / "onnx" / f"{stem}-{digest}.onnx"


def checked_graph_exists(name: str, path: str, cache_dir: Path | None) -> bool:
    """Whether the cache holds this model's graph with the manifest of its check (what
    OnnxRuntime.open_trusted opens without torch), under the current key."""
    target = graph_path(name, path, cache_dir)
    return target is not None and target.is_file() and target.with_suffix(".json").is_file()


def onnx_unsupported(model) -> str | None:
    """Why the exported graph (transformer, mean pooling, normalisation) would not reproduce
    this sentence-transformers pipeline; None when it does."""
    mods = list(model)
    kinds = [type(m).__name__ for m in mods]
    if not (kinds[:2] == ["Transformer", "Pooling"] and kinds[2:] in ([], ["Normalize"])):
        return f"its modules are {' + '.join(kinds)}, not Transformer + Pooling (+ Normalize)"
    if any(not type(m).__module__.startswith("sentence_transformers.") for m in mods):
        return "its modules are not sentence-transformers' own"
    tr, pool = mods[0], mods[1]
    if getattr(tr, "auto_model", None) is None:
        return "its Transformer has no Hugging Face model"
    text_only = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}
    if getattr(tr, "modality_config", text_only) != text_only:
        return f"its Transformer is configured as {tr.modality_config}, not text to last_hidden_state"
    if getattr(tr, "query_expansion", None) is not None:
        return "its Transformer expands queries"
    mode = getattr(pool, "pooling_mode", None)
    if mode is None:  # sentence-transformers < 6
        get = getattr(pool, "get_pooling_mode_str", None)
        mode = get() if get else "unknown"
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if modes != ("mean",):
        return f"its pooling is {'+'.join(modes)}, not mean"
    if getattr(model, "default_prompt_name", None):
        return "it adds a default prompt"
    if kinds[2:] and getattr(mods[2], "module_input_name", "sentence_embedding") != "sentence_embedding":
        return "its Normalize is not on the sentence embedding"
    return None


def installed_versions() -> list:
    """Installed versions of KEY_PACKAGES, from their metadata (no import)."""
    out: list[list[str | None]] = []
    for name in KEY_PACKAGES:
        try:
            out.append([name, metadata.version(name)])
        except metadata.PackageNotFoundError:
            out.append([name, None])
    return out


def mean_pooled(torch, transformer, names: tuple[str, ...]):
    """A module: the Hugging Face transformer, mean pooling over the attention mask (as
    sentence-transformers' Pooling does), L2 normalisation."""

    class MeanPooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs):
            feats = dict(zip(names, inputs))
            h = self.transformer(**feats, return_dict=True).last_hidden_state
            mask = feats["attention_mask"].unsqueeze(-1).to(h.dtype)
            v = (h * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(v, dim=1)

    return MeanPooled()


@contextmanager
def export_lock(target: Path) -> Iterator[None]:
    """One check of a graph at a time across the processes that share a model cache (several
    homes on one ENGRAM_MODEL_CACHE, daemons starting together): the others wait here, then find
    the graph checked and open it instead of loading torch to do the same work. Where locking
    files is not possible, each checks on its own, as before."""
    try:
        import fcntl

        target.parent.mkdir(parents=True, exist_ok=True)
        fh = open(target.with_name(f".{target.stem}.lock"), "a")  # noqa: SIM115 - held to the end of the block
    except (ImportError, OSError):
        yield
        return
    with fh:
        with suppress(OSError):  # a file system without locks: each checks on its own
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed, or the process ends
        yield


def write_atomic(target: Path, data: bytes) -> None:
    """Several processes may export at once: each writes its own file and renames it in place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
