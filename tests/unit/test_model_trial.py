"""benchmarks.experiments.model_trial convert: a holographic-memory model pack read back as the weights it holds."""

import json
import struct

import numpy as np
import pytest

from benchmarks.experiments.model_trial import convert

H, LAYERS, INTER, VOCAB, POS = 64, 2, 128, 20, 10  # 64 wide: every matrix is whole groups of 64


def _pack(path, rng):
    """A tiny pack in the real one's layout: header, tokenizer.json, then each tensor (int8
    values then one float32 scale per group of 64, or float32). Returns the weights it holds."""
    tensors, blobs, held = [], [], {}

    def add(name, shape, quantized):
        size = int(np.prod(shape))
        if quantized:
            q = rng.integers(-127, 128, size, dtype=np.int8)
            scales = rng.random(size // 64, dtype=np.float32) / 100
            blob = q.tobytes() + scales.astype("<f4").tobytes()
            held[name] = (q.astype(np.float32).reshape(-1, 64) * scales[:, None]).reshape(shape)
        else:
            held[name] = rng.standard_normal(shape).astype(np.float32)
            blob = held[name].astype("<f4").tobytes()
        tensors.append(
            {
                "name": name,
                "dtype": "i8" if quantized else "f32",
                "shape": list(shape),
                "len": len(blob),
                "group": 64 if quantized else 0,
            }
        )
        blobs.append(blob)

    add("word_emb", (VOCAB, H), True)
    for name, shape in (("pos_emb", (POS, H)), ("type_emb", (2, H)), ("emb_ln.w", (H,)), ("emb_ln.b", (H,))):
        add(name, shape, False)
    for i in range(LAYERS):
        for short, shape in (("qkv", (3 * H, H)), ("ao", (H, H)), ("f1", (INTER, H)), ("f2", (H, INTER))):
            add(f"l{i}.{short}.w", shape, True)
            add(f"l{i}.{short}.b", (shape[0],), False)
        for ln in ("aln", "fln"):
            add(f"l{i}.{ln}.w", (H,), False)
            add(f"l{i}.{ln}.b", (H,), False)
    tok = json.dumps(
        {"version": "1.0", "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}
    ).encode()
    head = json.dumps(
        {
            "format": 1,
            "meta": {"model": "tiny", "pooling": "cls", "max_length": POS - 2},
            "arch": {
                "hidden": H,
                "layers": LAYERS,
                "heads": 2,
                "intermediate": INTER,
                "vocab": VOCAB,
                "max_positions": POS,
                "type_vocab": 2,
                "layer_norm_eps": 1e-12,
            },
            "quantization": "int8",
            "tokenizer_len": len(tok),
            "tensors": tensors,
        }
    ).encode()
    path.write_bytes(b"HMSEMB01" + struct.pack("<Q", len(head)) + head + tok + b"".join(blobs))
    return held, tok


def test_convert_gives_the_pack_weights_under_bert_names(tmp_path):
    pytest.importorskip("torch")
    from safetensors.numpy import load_file

    held, tok = _pack(tmp_path / "m.hmsemb", np.random.default_rng(0))
    out = tmp_path / "out"
    convert(tmp_path / "m.hmsemb", out, center=False)
    got = load_file(str(out / "model.safetensors"))
    assert (out / "tokenizer.json").read_bytes() == tok
    np.testing.assert_array_equal(got["embeddings.word_embeddings.weight"], held["word_emb"])
    np.testing.assert_array_equal(got["embeddings.position_embeddings.weight"], held["pos_emb"])
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        # The pack's fused qkv matrix is query, key and value in that order.
        for j, part in enumerate(("query", "key", "value")):
            rows = slice(j * H, (j + 1) * H)
            np.testing.assert_array_equal(got[p + f"attention.self.{part}.weight"], held[f"l{i}.qkv.w"][rows])
            np.testing.assert_array_equal(got[p + f"attention.self.{part}.bias"], held[f"l{i}.qkv.b"][rows])
        np.testing.assert_array_equal(got[p + "intermediate.dense.weight"], held[f"l{i}.f1.w"])
        np.testing.assert_array_equal(got[p + "output.LayerNorm.bias"], held[f"l{i}.fln.b"])
    assert len(got) == 5 + LAYERS * 16
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (H, LAYERS, VOCAB)
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode_cls_token"] is True


def test_convert_refuses_what_is_not_a_pack_or_has_bytes_over(tmp_path):
    bad = tmp_path / "x.hmsemb"
    bad.write_bytes(b"NOTAPACK" + b"\0" * 32)
    with pytest.raises(SystemExit, match="not a holographic-memory model pack"):
        convert(bad, tmp_path / "out", center=False)
    _pack(tmp_path / "m.hmsemb", np.random.default_rng(1))
    (tmp_path / "m.hmsemb").write_bytes((tmp_path / "m.hmsemb").read_bytes() + b"\0\0\0\0")
    with pytest.raises(SystemExit, match="4 bytes left over"):
        convert(tmp_path / "m.hmsemb", tmp_path / "out2", center=False)
