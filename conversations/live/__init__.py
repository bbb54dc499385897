"""Live delivery of a conversation's events: the websocket consumer, the SSE stream, the
event log reader they share, and catch-up after a reconnect."""
