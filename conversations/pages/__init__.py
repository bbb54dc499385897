"""The chat page's HTML: rendered messages and runs, the plan view, the sidebar."""
