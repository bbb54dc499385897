"""Request plumbing shared by the JSON API and the live streams: token authentication
(``admit``), personal tokens, rate limits, JSON bodies and query parameters."""
