"""What a conversation remembers: message and event numbering, the event log read back,
compaction."""
