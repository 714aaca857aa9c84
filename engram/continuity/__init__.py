"""Continuity: sessions, claims, tasks, handoffs and plans, next-step checks, what a session is told
(recall context, resume, rendering) and what lifecycle hooks ask."""
