"""Search: the in-memory index (vectors, filters, BM25 postings), the graph, the ranking and its decay
math."""
