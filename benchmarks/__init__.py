"""Benchmarks for engram; each is its own package, run with python -m."""
