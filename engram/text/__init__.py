"""Text: tokens, statements and their comparison, dates, chunking, step words, conventions."""
