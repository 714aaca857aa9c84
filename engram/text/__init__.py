"""Text: the one tokenizer and stemmer, statements and how two differ, dates, chunking, the words of a
step."""
