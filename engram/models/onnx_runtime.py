"""ONNX Runtime for SentenceTransformerEmbedder (engram.models.embedding): the graph's sessions and
the tokens fed to them, the check against torch (here or in a child process), and the trusted path
that later starts take with only onnxruntime and `tokenizers`. Making the graph (the export from
torch, its cache file and key) is engram.models.onnx_export's."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engram.models.model_files import tokenizer_file
from engram.models.onnx_export import ONNX_FORMAT, Reference, export_graph, graph_path, write_atomic

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# The embedder's own logger: what it logs about its backend reads as one story (and tests read it).
log = logging.getLogger("engram.models.embedding")

CHECK_CHILD_TIMEOUT_S = 600.0  # loading torch and exporting the graph takes 10-60 s on a busy machine
ONNX_TOLERANCE = 1e-4  # largest |difference| from the torch vectors accepted in the probe check
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
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
        self.target = graph_path(name, path, cache_dir)  # the cache file; None without a folder or a local model
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
            graph = export_graph(reference, self.inputs)
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
            write_atomic(target, graph)
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
            write_atomic(self.file.with_suffix(".json"), json.dumps(info, indent=1).encode())
        except OSError as e:
            log.warning("could not record the checked graph (%s); later starts check it again", e)
        # From now on tokens come from `tokenizers` (identical, checked above): nothing here
        # holds the torch model any more.
        self._reference_tokens = None
        return True

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
