"""A DuckDB file damaged in the ways a disk or a copy damages one."""

from __future__ import annotations

import random

DAMAGES = ("truncated-half", "truncated-block", "truncated-odd", "garbled-header", "garbled-blocks", "zeros")


def damage(data: bytes, how: str, free_blocks: int = 0) -> bytes:
    """The file's bytes damaged one way. `free_blocks`: the file's free blocks (pragma_database_size).
    Cutting off only free blocks loses nothing (DuckDB itself cuts free blocks off the end), so
    the truncations reach past them into a used block wherever the free ones lie."""
    block = 262144  # DuckDB's block size
    if how == "truncated-half":
        return data[: len(data) // 2]
    if how == "truncated-block":
        return data[: len(data) - (free_blocks + 1) * block]
    if how == "truncated-odd":
        return data[: len(data) - free_blocks * block - 1000]
    if how == "garbled-header":
        return bytes(random.Random(1).randbytes(12288)) + data[12288:]
    if how == "garbled-blocks":
        mid = 12288 + block
        return data[:mid] + random.Random(2).randbytes(len(data) - mid - block) + data[-block:]
    if how == "zeros":
        return bytes(len(data))
    raise ValueError(how)
