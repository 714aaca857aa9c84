"""One-off experiments: each answered a question that is settled; kept to measure it again, run with python -m."""
