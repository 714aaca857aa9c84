"""ONNX Runtime for SentenceTransformerEmbedder (engram.models.embedding): the graph exported from
the torch model, its cache file and cache key, the check against torch (here or in a child
process), and the trusted path that later starts take with only onnxruntime and `tokenizers`."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from engram.models.model_files import tokenizer_file

if TYPE_CHECKING:
    from tokenizers import Tokenizer

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


class Reference(Protocol):
    """What exporting the graph and checking it need of the torch model it reproduces
    (engram.models.embedding.TorchModel)."""

    model: Any  # the sentence-transformers model
    torch: Any  # the torch module
    lock: threading.Lock  # held while torch runs: its thread count is global
    dim: int

    def tokenize(self, texts: list[str]) -> dict: ...

    def run(self, features: dict, large: bool = False) -> np.ndarray: ...


class OnnxRuntime:
    """One model's graph on ONNX Runtime: its sessions, its cache file and the manifest of its
    check, and the `tokenizers` tokenizer that check vouched for.

    A start either opens a graph an earlier check vouched for (`open_trusted`: no torch), or has a
    child process check it (`check_in_child`), or loads or exports it and checks it against the
    torch model here (`start`, then `trust`). Until `tokenizers` is vouched for, the graph is fed
    the torch model's own tokens.
    """

    def __init__(self, name: str, path: str, threads: int, cache_dir: Path | None):
        self.name = name
        self.path = path
        self.threads = threads
        self.cache_dir = cache_dir
        self.target = _graph_path(name, path, cache_dir)  # the cache file; None without a folder or a local model
        self.session = None  # an onnxruntime.InferenceSession once a graph is in use
        self.file: Path | None = None  # the cached graph in use, if any
        self.exported = False  # whether this start exported the graph (vs. read the cache)
        # How the graph in use was vouched for: "trusted" (a manifest of an earlier check),
        # "checked" (against torch in this process).
        self.checked: str | None = None
        self.inputs: tuple[str, ...] = ()
        self.dim = 0  # the vectors' width, from the manifest (open_trusted)
        self._large = None  # the session for large batches, made when first needed
        self._large_lock = threading.Lock()
        self._fast: Tokenizer | None = None  # gives the model's own tokens (checked)
        self._fast_lock = threading.Lock()  # a fast tokenizer must not be called from two threads at once
        self._lower = False
        # The torch model's tokens (start), until `tokenizers` is vouched for (trust).
        self._reference_tokens: Callable[[list[str]], dict] | None = None

    # ------------------------------------------------------------------ encoding

    def tokenize(self, texts: list[str]) -> dict:
        """The tokens the graph in use is fed: the model's own, padded to the longest, truncated
        at max_seq_length (from `tokenizers` once vouched for, else from the torch model)."""
        fast = self._fast
        if fast is not None:
            with self._fast_lock:
                return self._fast_tokens(fast, texts)
        if self._reference_tokens is None:
            raise RuntimeError("the graph has no tokenizer yet: open_trusted or start first")
        return self._reference_tokens(texts)

    def run(self, features: dict, large: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors for tokenised texts; a large batch on the large session."""
        return self.run_in(self.large_session() if large else self.session, features)

    def run_in(self, session, features: dict) -> np.ndarray:
        """Vectors from one session of this graph (this one's, or another a benchmark made)."""
        # No lock: an InferenceSession serves concurrent run() calls.
        feed = {n: np.asarray(features[n]) for n in self.inputs}
        return np.asarray(session.run(None, feed)[0], dtype=np.float32)

    def large_session(self):
        """Large batches gain from both cores, as in the torch path: a session with more threads
        (no spinning), from the cached file, checked against the main session. Without a cached
        file, or if it fails, large batches use the main session."""
        if self._large is None:
            with self._large_lock:
                if self._large is None:
                    self._large = self._make_large_session()
        return self._large

    def _make_large_session(self):
        if self.threads >= ONNX_LARGE_BATCH_THREADS or self.file is None:
            return self.session
        try:
            session = _ort_session(str(self.file), ONNX_LARGE_BATCH_THREADS)
            features = self.tokenize(list(ONNX_PROBES[:-1]))
            err = float(np.abs(self.run_in(session, features) - self.run_in(self.session, features)).max())
        except Exception as e:  # noqa: BLE001 - e.g. the file was replaced or removed since
            err, why = float("inf"), f"{type(e).__name__}: {e}"
        else:
            why = f"its vectors differ by {err:.2g}"
        if err > ONNX_TOLERANCE:
            log.warning(
                "large batches stay on one thread: the %d-thread session failed (%s)", ONNX_LARGE_BATCH_THREADS, why
            )
            return self.session
        return session

    def _fast_tokens(self, fast: Tokenizer, texts: list[str]) -> dict:
        """The model's tokens from the `tokenizers` library, padded to the longest, as numpy."""
        if self._lower:
            texts = [t.lower() for t in texts]
        enc = fast.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }

    # ------------------------------------------------------------------ the trusted path

    def open_trusted(self) -> bool:
        """Open the graph an earlier start checked (its manifest beside it, same cache key) with
        the `tokenizers` tokenizer that check vouched for. False when there is none or it fails;
        the caller then loads torch and checks (or exports) the graph again."""
        target = self.target
        if target is None:
            return False
        try:
            info = json.loads(target.with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False  # never checked under this key (new weights or versions): not an error
        try:
            if info.get("format") != ONNX_FORMAT or target.stat().st_size != info.get("graph_bytes"):
                raise ValueError("the graph file is not the one that was checked")
            self.inputs = tuple(info["inputs"])
            self.dim = int(info["dim"])
            self._fast = fast = _fast_tokenizer(info)
            self._lower = bool(info["lower"])
            session = _ort_session(str(target), self.threads)
            v = self.run_in(session, self._fast_tokens(fast, ["ok"]))
            if v.shape != (1, self.dim) or not abs(float(np.linalg.norm(v)) - 1.0) < 1e-3:
                raise ValueError(f"a probe gave a {v.shape} vector, not one unit vector of {self.dim}")
        except Exception as e:  # noqa: BLE001 - any failure here means: check it again with torch
            log.warning(
                "checked ONNX graph %s cannot be used (%s: %s); checking it again with torch",
                target,
                type(e).__name__,
                str(e)[:200],
            )
            self._fast, self.inputs = None, ()
            return False
        self.session, self.file, self.checked = session, target, "trusted"
        return True

    def check_in_child(self) -> bool:
        """Run the check against torch in a child process (engram.models.onnx_verify); True when it
        recorded a checked graph. On any failure this process checks the graph itself."""
        import subprocess
        import sys

        cmd = [sys.executable, "-m", "engram.models.onnx_verify", self.name, str(self.cache_dir), str(self.threads)]
        try:
            r = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=CHECK_CHILD_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as e:
            log.warning("could not check the ONNX graph in a child process (%s); checking it here", e)
            return False
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
            log.warning("checking the ONNX graph in a child process failed (%s); checking it here", why[:300])
            return False
        return True

    # ------------------------------------------------------------------ the check against torch

    def start(self, reference: Reference) -> str:
        """Open a session of the graph checked against `reference`, from the cache or a fresh
        export (`session` stays None when neither passes). Returns why: what was used, or why
        ONNX Runtime is not."""
        why = self._load_or_export(reference)
        if self.session is not None:
            self.checked = "checked"
        return why

    def _load_or_export(self, reference: Reference) -> str:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as e:
            return f"onnxruntime is not installed ({e})"
        self._reference_tokens = reference.tokenize
        features = [k for k in reference.tokenize(["a"]) if k != "modality"]
        inputs = tuple(k for k in features if k in ONNX_INPUTS)
        if "input_ids" not in inputs or "attention_mask" not in inputs or len(inputs) < len(features):
            return f"its tokenizer gives {', '.join(features)}, not input_ids, attention_mask (token_type_ids)"
        self.inputs = inputs
        target = self.target
        if target is not None and target.exists():
            try:
                session = _ort_session(str(target), self.threads)
                err = self._error(session, reference)
            except Exception as e:  # noqa: BLE001 - a truncated or corrupt file: export again
                log.warning("cached ONNX graph %s is unreadable (%s); exporting it again", target, type(e).__name__)
            else:
                if err <= ONNX_TOLERANCE:
                    self.session, self.file = session, target
                    return f"cached graph {target}"
                log.warning("cached ONNX graph %s differs from torch by %.2g; exporting it again", target, err)
        try:
            graph = self._export(reference)
            session = _ort_session(graph, self.threads)
            err = self._error(session, reference)
        except Exception as e:  # noqa: BLE001 - any failure here means: stay on torch
            return f"export failed ({type(e).__name__}: {str(e)[:200]})"
        if err > ONNX_TOLERANCE:
            return f"the exported graph's vectors differ from torch's by {err:.2g} (> {ONNX_TOLERANCE:g})"
        self.session, self.exported = session, True
        if target is None:
            return "exported in memory (no cache folder, or the model is not a local folder)"
        try:
            _write_atomic(target, graph)
        except OSError as e:
            return f"exported, but not cached ({target}: {e})"
        self.file = target
        stem, key = target.stem.rsplit("-", 1)
        for old in target.parent.glob(f"*{stem}-*"):
            # The same model exported under another key (other weights or versions): its graph,
            # manifest and lock file (.name.lock, see export_lock) are stale.
            m = re.fullmatch(r"(\.?)" + re.escape(stem) + r"-([0-9a-f]{16})\.(onnx|json|lock)", old.name)
            if m and m.group(2) != key and (m.group(1) == ".") == (m.group(3) == "lock"):
                old.unlink(missing_ok=True)
        return f"exported to {target}"

    def trust(self, reference: Reference) -> bool:
        """After the graph passed the check against torch: if the `tokenizers` library gives the
        model's own tokens on every probe, record the check in a manifest beside the cached graph
        (so later starts need no torch) and feed the graph from `tokenizers` from now on. True
        then: the caller may drop the torch model."""
        if self.file is None:
            return False  # exported in memory only: there is nothing for a later start to trust
        tr = reference.model[0]
        info = {
            "format": ONNX_FORMAT,
            "graph": self.file.name,
            "graph_bytes": self.file.stat().st_size,
            "inputs": list(self.inputs),
            "dim": reference.dim,
            "max_seq_length": int(reference.model.max_seq_length),
            "lower": bool(getattr(tr, "do_lower_case", False)),
        }
        try:
            tok = getattr(tr, "tokenizer", None)
            if tok is None:
                raise ValueError("the model has no tokenizer to compare with")
            info.update(
                tokenizer=str(tokenizer_file(Path(self.path))),
                pad_id=int(tok.pad_token_id),
                pad_token=str(tok.pad_token),
                pad_type_id=int(getattr(tok, "pad_token_type_id", 0)),
            )
            fast = _fast_tokenizer(info)
            self._fast, self._lower = fast, bool(info["lower"])
            for texts in [[t] for t in ONNX_PROBES] + [list(ONNX_PROBES[:-1])]:
                want, got = reference.tokenize(texts), self._fast_tokens(fast, texts)
                for n in self.inputs:
                    if not np.array_equal(np.asarray(want[n]), got[n]):
                        raise ValueError(f"its {n} differ from the model's on {texts[0][:30]!r}")
        except Exception as e:  # noqa: BLE001 - the graph still serves; only later starts pay for torch
            self._fast = None
            log.info(
                "later starts will load torch to check the graph again: the `tokenizers` "
                "tokenizer is not usable (%s: %s)",
                type(e).__name__,
                str(e)[:200],
            )
            return False
        try:
            _write_atomic(self.file.with_suffix(".json"), json.dumps(info, indent=1).encode())
        except OSError as e:
            log.warning("could not record the checked graph (%s); later starts check it again", e)
        # From now on tokens come from `tokenizers` (identical, checked above): nothing here
        # holds the torch model any more.
        self._reference_tokens = None
        return True

    def _export(self, reference: Reference) -> bytes:
        """The transformer plus mean pooling and L2 normalisation as one ONNX graph."""
        torch, names = reference.torch, self.inputs
        # Traced with padding, so the graph keeps the attention-mask path.
        example = reference.tokenize(["a", "an example sentence, longer than the first one"])
        module = _mean_pooled(torch, reference.model[0].auto_model, names).eval()
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

    def _error(self, session, reference: Reference) -> float:
        """Largest |difference| between the session's and torch's vectors on the probe texts."""
        worst = 0.0
        for texts in [[t] for t in ONNX_PROBES] + [list(ONNX_PROBES[:-1])]:
            features = reference.tokenize(texts)
            got = self.run_in(session, features)
            want = reference.run(features)
            if got.shape != want.shape:
                return float("inf")
            worst = max(worst, float(np.abs(got - want).max()))
        return worst


def _graph_path(name: str, path: str, cache_dir: Path | None) -> Path | None:
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
    key = json.dumps([ONNX_FORMAT, ONNX_OPSET, str(root.resolve()), files, _versions()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._]+", "_", name).strip("_.")[-80:] or "model"
    return Path(cache_dir) / "onnx" / f"{stem}-{digest}.onnx"


def checked_graph_exists(name: str, path: str, cache_dir: Path | None) -> bool:
    """Whether the cache holds this model's graph with the manifest of its check (what
    OnnxRuntime.open_trusted opens without torch), under the current key."""
    target = _graph_path(name, path, cache_dir)
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


def _versions() -> list:
    """Installed versions of KEY_PACKAGES, from their metadata (no import)."""
    out: list[list[str | None]] = []
    for name in KEY_PACKAGES:
        try:
            out.append([name, metadata.version(name)])
        except metadata.PackageNotFoundError:
            out.append([name, None])
    return out


def _fast_tokenizer(info: dict) -> Tokenizer:
    """A `tokenizers` tokenizer set up as the manifest says: truncation at max_seq_length, padding
    to the longest text with the model's pad token."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(info["tokenizer"])
    tok.enable_truncation(max_length=int(info["max_seq_length"]))
    tok.enable_padding(
        pad_id=int(info["pad_id"]), pad_token=str(info["pad_token"]), pad_type_id=int(info["pad_type_id"])
    )
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
