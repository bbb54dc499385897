"""How a user organises their conversations in the sidebar: folders (one level of
sub-folders), tags and pins. Business rules live here, out of the views and the API, so
both refuse the same things with the same words; each module also reads its own rows
(always scoped to the owner)."""
