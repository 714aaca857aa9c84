"""Models: the embedding provider protocol, the ONNX runtime, where model files come from, the
reranker."""
