"""The engine: the state its parts share, the derived indexes' upkeep, writes and their resolution,
recall, curation."""
