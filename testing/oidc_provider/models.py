"""What a provider knows about a user beyond ``auth.User``."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Profile(models.Model):
    """``email_verified`` is the provider's word, so a test can send ``false``: an app must
    not trust an unverified address to match an existing account."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    email_verified = models.BooleanField(default=True)
