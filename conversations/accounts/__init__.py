"""Signed-in users: the cached user backend and the API's login lockout."""
