"""Administration of a whole store: what runs rarely and by hand."""
