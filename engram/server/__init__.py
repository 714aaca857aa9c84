"""Server side: MCP tools, HTTP API and the daemon that owns the database."""
