"""`python -m engram.models.onnx_verify MODEL CACHE_DIR THREADS`: check a model's ONNX graph against torch, then exit.

A daemon that finds no checked graph runs this as a child process (SentenceTransformerEmbedder),
so torch's memory is given back when the check is done; the daemon then opens the checked graph
with ONNX Runtime alone. Exit 0 when the graph is recorded as checked, 3 when it could not be.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from engram.models.embedding import SentenceTransformerEmbedder

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    model, cache, threads = argv[0], Path(argv[1]), int(argv[2])
    emb = SentenceTransformerEmbedder(model, cache, threads, check_in_child=False)
    if emb.backend != "onnx" or emb.onnx_file is None or not emb.onnx_file.with_suffix(".json").exists():
        print(f"no checked ONNX graph recorded for {model} (backend {emb.backend})", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
