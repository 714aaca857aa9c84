"""engram inside the agent clients' lifecycle: hook installers (install.py)."""
