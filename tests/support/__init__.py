"""What the tests share: a daemon on the fake embedder, engram's HTTP server and the panel's browser,
texts that keep memories apart, damaged files, the fix-capture cases and their transcripts.

Benchmarks and scripts that need the same set-up import it from here; a test never imports a
private name from benchmarks/ or scripts/ (tests/unit/test_architecture.py checks it)."""
