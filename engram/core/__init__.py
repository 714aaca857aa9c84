"""The core: domain types, errors, the clock, ids, settings, argument validation, redaction, project
identity and the engine's record documents. Imports nothing else of engram."""
