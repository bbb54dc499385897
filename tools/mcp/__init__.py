"""MCP servers as tool hubs: the SDK client (``client``) and the Django side (``services``)."""
