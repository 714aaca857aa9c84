"""Over the facade: what several calls of an Engram make together for one operation. The hooks'
side in the daemon: the block a session starts with, a prompt's memories and the automatic
checkpoint (lifecycle.py), per-turn capture (capture.py), and the operations that serve them to
engram.api (hook_operations.py). Each takes the facade, typed Engram, and uses its public methods
only: the write path, recall and the store are the ones every caller gets."""
