"""Administration over the facade: maintenance and its scheduler, export and import, importers from
other tools, per-user keys."""
