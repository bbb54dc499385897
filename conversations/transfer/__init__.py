"""Conversations leaving and entering the site: export, import, share links."""
