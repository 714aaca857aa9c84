"""Continuity: sessions, claims, tasks, handoffs, plans, resume, checkpoints and capture."""
