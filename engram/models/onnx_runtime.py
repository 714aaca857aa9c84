"""The ONNX Runtime backend of SentenceTransformerEmbedder (engram.models.embedding): the graph exported
from the torch model, its cache file and cache key, the check against torch (here or in a child
process), and the trusted path that later starts take with only onnxruntime and `tokenizers`."""

from __future__ import annotations

import gc
import hashlib
import io
import json
import logging
import os
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path

import numpy as np

from engram.models.model_files import _tokenizer_file

# The embedder's own logger: what it logs about its backend reads as one story (and tests read it).
log = logging.getLogger("engram.models.embedding")

# ONNX Runtime path. Bump ONNX_FORMAT when the exported graph or its manifest changes: it is part
# of the cache key.
ONNX_FORMAT = 2
ONNX_OPSET = 17
CHECK_CHILD_TIMEOUT_S = 600.0  # loading torch and exporting the graph takes 10-60 s on a busy machine
ONNX_TOLERANCE = 1e-4  # largest |difference| from the torch vectors accepted in the probe check
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Libraries whose versions shape the exported graph or the tokens fed to it: a new version of any
# of them makes the checked graph untrusted (a new cache key), so it is exported and checked again.
# Read from the installed metadata, so computing the key imports none of them.
KEY_PACKAGES = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnxruntime", "onnx")
# Threads for large batches when `threads` is 1, in a second session made on the first large
# batch. Measured on 2 shared cores (scripts/embed_bench.py, 128 texts): 2 threads without
# spinning took 0.56-0.66x the time of 1 with the other core free, 1.00-1.03x with it busy
# (spinning threads: 0.52-0.61x free, 1.05-1.16x busy; torch on 2 threads: 1.4-1.5x busy).
ONNX_LARGE_BATCH_THREADS = 2
# Probe texts for the check, each alone: short, typical, non-ASCII, and longer than any
# max_seq_length in use (truncation). Then all but the long one as one batch (with padding).
ONNX_PROBES = (
    "ok",
    "  MixedCase\tSpacing and\nnew lines  ",
    "Deploys go to Fly.io from main; the API timeout is 30 seconds.",
    "Zoë’s café in 東京 — naïve résumé, 100 % ✓ 🚀",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn. " * 40,
)


class OnnxBackend:
    """The ONNX Runtime half of SentenceTransformerEmbedder (a mixin: it reads the embedder's
    model, tokenizer and settings, set up in its __init__)."""

    def _run_onnx(self, session, features: dict) -> np.ndarray:
        # No lock: an InferenceSession serves concurrent run() calls.
        feed = {n: np.asarray(features[n]) for n in self._onnx_inputs}
        return np.asarray(session.run(None, feed)[0], dtype=np.float32)

    def _large_session(self):
        """Large batches gain from both cores, as in the torch path: a session with more threads
        (no spinning), from the cached file, checked against the main session. Without a cached
        file, or if it fails, large batches use the main session."""
        if self._onnx_large is None:
            with self._onnx_large_lock:
                if self._onnx_large is None:
                    self._onnx_large = self._make_large_session()
        return self._onnx_large

    def _make_large_session(self):
        if self.threads >= ONNX_LARGE_BATCH_THREADS or self.onnx_file is None:
            return self._onnx
        try:
            session = _ort_session(str(self.onnx_file), ONNX_LARGE_BATCH_THREADS)
            features = self._tokenize(list(ONNX_PROBES[:-1]))
            err = float(np.abs(self._run_onnx(session, features) - self._run_onnx(self._onnx, features)).max())
        except Exception as e:  # noqa: BLE001 - e.g. the file was replaced or removed since
            err, why = float("inf"), f"{type(e).__name__}: {e}"
        else:
            why = f"its vectors differ by {err:.2g}"
        if err > ONNX_TOLERANCE:
            log.warning("large batches stay on one thread: the %d-thread session failed (%s)",
                        ONNX_LARGE_BATCH_THREADS, why)
            return self._onnx
        return session

    def _start_onnx(self, cache_dir: Path | None) -> str:
        """Set self._onnx to a checked session, from the cache or a fresh export. Returns why
        (what was used, or why ONNX Runtime is not)."""
        try:
            import onnxruntime  # noqa: F401
        except ImportError as e:
            return f"onnxruntime is not installed ({e})"
        features = [k for k in self._tokenize(["a"]) if k != "modality"]
        inputs = tuple(k for k in features if k in ONNX_INPUTS)
        if "input_ids" not in inputs or "attention_mask" not in inputs or len(inputs) < len(features):
            return f"its tokenizer gives {', '.join(features)}, not input_ids, attention_mask (token_type_ids)"
        self._onnx_inputs = inputs
        target = self._onnx_path(cache_dir)
        if target is not None and target.exists():
            try:
                session = _ort_session(str(target), self.threads)
                err = self._onnx_error(session)
            except Exception as e:  # noqa: BLE001 - a truncated or corrupt file: export again
                log.warning("cached ONNX graph %s is unreadable (%s); exporting it again",
                            target, type(e).__name__)
            else:
                if err <= ONNX_TOLERANCE:
                    self._onnx, self.onnx_file = session, target
                    return f"cached graph {target}"
                log.warning("cached ONNX graph %s differs from torch by %.2g; exporting it again",
                            target, err)
        try:
            graph = self._export_onnx()
            session = _ort_session(graph, self.threads)
            err = self._onnx_error(session)
        except Exception as e:  # noqa: BLE001 - any failure here means: stay on torch
            return f"export failed ({type(e).__name__}: {str(e)[:200]})"
        if err > ONNX_TOLERANCE:
            return f"the exported graph's vectors differ from torch's by {err:.2g} (> {ONNX_TOLERANCE:g})"
        self._onnx, self.onnx_exported = session, True
        if target is None:
            return "exported in memory (no cache folder, or the model is not a local folder)"
        try:
            _write_atomic(target, graph)
        except OSError as e:
            return f"exported, but not cached ({target}: {e})"
        self.onnx_file = target
        stem, key = target.stem.rsplit("-", 1)
        for old in target.parent.glob(f"*{stem}-*"):
            # The same model exported under another key (other weights or versions): its graph,
            # manifest and lock file (.name.lock, see export_lock) are stale.
            m = re.fullmatch(r"(\.?)" + re.escape(stem) + r"-([0-9a-f]{16})\.(onnx|json|lock)", old.name)
            if m and m.group(2) != key and (m.group(1) == ".") == (m.group(3) == "lock"):
                old.unlink(missing_ok=True)
        return f"exported to {target}"

    def _onnx_path(self, cache_dir: Path | None) -> Path | None:
        """Cache file named from the model and a key of its weights (size, mtime) and of the
        versions that shape the graph; None when there is no folder or no local model."""
        root = Path(self.path)
        if cache_dir is None or not root.is_dir():
            return None
        files = []
        for f in sorted(root.rglob("*")):
            rel = f.relative_to(root)
            if f.is_file() and f.suffix in (".safetensors", ".bin", ".json", ".pt", ".pth", ".txt", ".model") \
                    and not {"onnx", "openvino"} & set(rel.parts[:-1]):
                st = f.stat()
                files.append([str(rel), st.st_size, st.st_mtime_ns])
        key = json.dumps([ONNX_FORMAT, ONNX_OPSET, str(root.resolve()), files, _versions()])
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        stem = re.sub(r"[^A-Za-z0-9._]+", "_", self.name).strip("_.")[-80:] or "model"
        return Path(cache_dir) / "onnx" / f"{stem}-{digest}.onnx"

    # ------------------------------------------------------------------ the trusted path

    def _check_in_child(self, cache_dir: Path | None) -> bool:
        """Run the check against torch in a child process (engram.models.onnx_verify); True when it
        recorded a checked graph. On any failure this process checks the graph itself."""
        import subprocess
        import sys
        cmd = [sys.executable, "-m", "engram.models.onnx_verify", self.name, str(cache_dir), str(self.threads)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_CHILD_TIMEOUT_S,
                               stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            log.warning("could not check the ONNX graph in a child process (%s); checking it here", e)
            return False
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
            log.warning("checking the ONNX graph in a child process failed (%s); checking it here", why[:300])
            return False
        return True

    def _open_trusted(self, cache_dir: Path | None) -> bool:
        """Open the graph an earlier start checked (its manifest beside it, same cache key) with
        the `tokenizers` tokenizer that check vouched for. False when there is none or it fails;
        the caller then loads torch and checks (or exports) the graph again."""
        target = self._onnx_path(cache_dir)
        if target is None:
            return False
        try:
            info = json.loads(target.with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False  # never checked under this key (new weights or versions): not an error
        try:
            if info.get("format") != ONNX_FORMAT or target.stat().st_size != info.get("graph_bytes"):
                raise ValueError("the graph file is not the one that was checked")
            self._onnx_inputs = tuple(info["inputs"])
            self.dim = int(info["dim"])
            self._fast, self._lower = _fast_tokenizer(info), bool(info["lower"])
            self._prep = self._fast_prep
            session = _ort_session(str(target), self.threads)
            v = self._run_onnx(session, self._fast_prep(["ok"]))
            if v.shape != (1, self.dim) or not abs(float(np.linalg.norm(v)) - 1.0) < 1e-3:
                raise ValueError(f"a probe gave a {v.shape} vector, not one unit vector of {self.dim}")
        except Exception as e:  # noqa: BLE001 - any failure here means: check it again with torch
            log.warning("checked ONNX graph %s cannot be used (%s: %s); checking it again with torch",
                        target, type(e).__name__, str(e)[:200])
            self._fast, self._onnx_inputs = None, ()
            return False
        self._onnx, self.onnx_file, self.backend, self.checked = session, target, "onnx", "trusted"
        return True

    def _trust(self, cache_dir: Path | None) -> None:
        """After the graph passed the check against torch: if the `tokenizers` library gives the
        model's own tokens on every probe, record the check in a manifest beside the cached graph
        (so later starts need no torch) and let this process drop the torch model."""
        if self.onnx_file is None:
            return  # exported in memory only: there is nothing for a later start to trust
        tr = self._model[0]
        info = {"format": ONNX_FORMAT, "graph": self.onnx_file.name,
                "graph_bytes": self.onnx_file.stat().st_size, "inputs": list(self._onnx_inputs),
                "dim": self.dim, "max_seq_length": int(self._model.max_seq_length),
                "lower": bool(getattr(tr, "do_lower_case", False))}
        try:
            tok = getattr(tr, "tokenizer", None)
            info.update(tokenizer=str(_tokenizer_file(Path(self.path))), pad_id=int(tok.pad_token_id),
                        pad_token=str(tok.pad_token), pad_type_id=int(getattr(tok, "pad_token_type_id", 0)))
            fast = _fast_tokenizer(info)
            self._fast, self._lower = fast, info["lower"]
            for texts in [[t] for t in ONNX_PROBES] + [list(ONNX_PROBES[:-1])]:
                want, got = self._prep(texts), self._fast_prep(texts)
                for n in self._onnx_inputs:
                    if not np.array_equal(np.asarray(want[n]), got[n]):
                        raise ValueError(f"its {n} differ from the model's on {texts[0][:30]!r}")
        except Exception as e:  # noqa: BLE001 - the graph still serves; only later starts pay for torch
            self._fast = None
            log.info("later starts will load torch to check the graph again: the `tokenizers` "
                     "tokenizer is not usable (%s: %s)", type(e).__name__, str(e)[:200])
            return
        try:
            _write_atomic(self.onnx_file.with_suffix(".json"), json.dumps(info, indent=1).encode())
        except OSError as e:
            log.warning("could not record the checked graph (%s); later starts check it again", e)
        # From now on tokens come from `tokenizers` (identical, checked above) and vectors from
        # ONNX Runtime: the torch model is dead weight in this process.
        self._prep, self._model = self._fast_prep, None
        gc.collect()

    def _fast_prep(self, texts: list[str]) -> dict:
        """The model's tokens from the `tokenizers` library, padded to the longest, as numpy."""
        if self._lower:
            texts = [t.lower() for t in texts]
        enc = self._fast.encode_batch(texts)
        return {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}

    def _export_onnx(self) -> bytes:
        """The transformer plus mean pooling and L2 normalisation as one ONNX graph."""
        torch, names = self._torch, self._onnx_inputs
        # Traced with padding, so the graph keeps the attention-mask path.
        example = self._tokenize(["a", "an example sentence, longer than the first one"])
        module = _mean_pooled(torch, self._model[0].auto_model, names).eval()
        axes = {n: {0: "batch", 1: "tokens"} for n in names}
        axes["embedding"] = {0: "batch"}
        buf = io.BytesIO()
        with self._lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's warnings about shape-dependent branches
            torch.onnx.export(module, tuple(example[n] for n in names), buf, input_names=list(names),
                              output_names=["embedding"], dynamic_axes=axes,
                              opset_version=ONNX_OPSET, dynamo=False)
        return buf.getvalue()

    def _onnx_error(self, session) -> float:
        """Largest |difference| between the session's and torch's vectors on the probe texts."""
        worst = 0.0
        for texts in [[t] for t in ONNX_PROBES] + [list(ONNX_PROBES[:-1])]:
            features = self._tokenize(texts)
            got = self._run_onnx(session, features)
            want = self._run_torch(features)
            if got.shape != want.shape:
                return float("inf")
            worst = max(worst, float(np.abs(got - want).max()))
        return worst


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


def _versions() -> list:
    """Installed versions of KEY_PACKAGES, from their metadata (no import)."""
    out = []
    for name in KEY_PACKAGES:
        try:
            out.append([name, metadata.version(name)])
        except metadata.PackageNotFoundError:
            out.append([name, None])
    return out


def _fast_tokenizer(info: dict):
    """A `tokenizers` tokenizer set up as the manifest says: truncation at max_seq_length, padding
    to the longest text with the model's pad token."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(info["tokenizer"])
    tok.enable_truncation(max_length=int(info["max_seq_length"]))
    tok.enable_padding(pad_id=int(info["pad_id"]), pad_token=str(info["pad_token"]),
                       pad_type_id=int(info["pad_type_id"]))
    return tok


def _mean_pooled(torch, transformer, names: tuple[str, ...]):
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


def _ort_session(model: str | bytes, threads: int):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only: no optimiser chatter on stderr
    # Idle threads sleep instead of spinning: spinning stalled 2 threads on a busy shared core.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


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


def _write_atomic(target: Path, data: bytes) -> None:
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
