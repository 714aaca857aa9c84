"""engram inside a coding agent's lifecycle: the `engram hook` command for Claude Code, Codex and Gemini CLI.

run: the entry point (an event's JSON on stdin, the client's JSON on stdout, a line in hooks.log).
transcript: what a session did, read from the client's transcript file.
checkpoint: an automatic checkpoint built from that and the git work tree, without any model.
install: `engram hooks install/uninstall/status`, the entries in each client's settings file.
The engine's side (the session-start block, a prompt's memories, storing a checkpoint) is engram.workflows.lifecycle.
"""
