"""LoCoMo retrieval benchmark: python -m benchmarks.locomo --help.

The result document holds overall_1_4 and by_category for the default mode
(hybrid), by_mode for every mode run, timing, settings, data_sha256 and
no_evidence (questions left out because they list no evidence).
"""
