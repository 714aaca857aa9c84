"""Long content cut into chunks: never mid-word where the text has a word boundary near the cut."""

from itertools import pairwise

from engram.text.chunking import chunk_spans


def _mid_word_starts(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[s - 10 : s + 10] for s, _ in spans[1:] if text[s - 1].isalnum() and text[s].isalnum()]


def _covers(text: str, spans: list[tuple[int, int]]) -> bool:
    return spans[0][0] == 0 and spans[-1][1] == len(text) and all(b[0] < a[1] for a, b in pairwise(spans))


def test_a_sentence_near_the_start_then_a_long_unbroken_stretch_is_cut_at_words_not_again_and_again():
    # An assistant's answer: one short sentence, then a code block with no sentence end in it.
    text = "User: run it\nAssistant: Done. Output:\n\n```\n" + "\n".join(
        f"agent_{i} processando request {i} status ok" for i in range(120)
    )
    spans = chunk_spans(text, 1000, 100)
    assert _covers(text, spans)
    assert _mid_word_starts(text, spans) == []
    assert len(spans) <= len(text) // 800 + 1  # each chunk but the last is at least half a chunk long
    assert all(e - s >= 500 for s, e in spans[:-1])


def test_text_without_spaces_starts_its_chunks_after_punctuation():
    text = "Tool output: " + ",".join(f'{{"id":"item{i}","value":"v{i}"}}' for i in range(200))
    spans = chunk_spans(text, 1000, 100)
    assert _covers(text, spans)
    assert _mid_word_starts(text, spans) == []


def test_prose_is_still_cut_after_sentences_and_each_chunk_overlaps_the_one_before():
    text = " ".join(f"Sentence number {i} says something about the deploy." for i in range(100))
    spans = chunk_spans(text, 1000, 100)
    assert _covers(text, spans)
    assert all(text[e - 1] in ". " for _, e in spans[:-1])
    assert all(b[0] < a[1] for a, b in pairwise(spans))


def test_a_chunk_never_ends_where_the_one_before_ended():
    # Found by tests/text/test_text_properties.py: the overlap of the second chunk began before the
    # sentence cut the first ended at, and the second chunk ended there again (a chunk of one space).
    text = "Ab. " + "Long" * 30
    spans = chunk_spans(text, 20, 1)
    assert _covers(text, spans)
    assert all(e0 < e1 for (_, e0), (_, e1) in pairwise(spans))
