import numpy as np
import pytest


@pytest.mark.model
def test_a_query_embeds_as_in_a_batch(real_embedder):
    """embed_query runs the model's modules directly; it must give what encode() gives."""
    texts = ["The API timeout is 30 seconds.", "Deploys go to Fly.io from main.",
             "Caroline: I went to the LGBTQ support group yesterday and it was so powerful."]
    batch = real_embedder.embed_batch(texts)
    for text, expected in zip(texts, batch):
        got = real_embedder.embed_query(text + " ")  # a new string: not served from the cache
        assert got.dtype == np.float32 and got.shape == (real_embedder.dim,)
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
        assert float(got @ expected) > 0.9999
        assert float(real_embedder.embed_batch([text])[0] @ expected) > 0.9999
