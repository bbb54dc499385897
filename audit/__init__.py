"""The audit log: who did what, when, from where (append-only)."""
