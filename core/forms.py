"""Write-only form fields for secrets, shared by every admin that stores one.

A secret (an API key, a secret header, a secret tool setting) is never rendered back into
a page: the form shows whether one is set; an empty submit keeps the stored value, a
"clear" checkbox removes it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.html import escape
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy

__all__ = ["WriteOnlyTextarea", "resolve_secret", "write_only_field"]


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value, not even the one just submitted."""

    def format_value(self, value: Any) -> None:
        return None


def write_only_field(*, label: str, hint: str, multiline: bool = False) -> forms.CharField:
    """An optional input for a secret: ``hint`` says whether one is stored."""
    widget: forms.Widget
    if multiline:
        widget = WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"})
    else:
        widget = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})
    return forms.CharField(
        label=label,
        required=False,
        strip=True,
        widget=widget,
        # The admin renders help text unescaped; hints carry admin-entered header names.
        help_text=escape(
            format_lazy("{} {}", hint, gettext_lazy("Leave empty to keep the current value."))
        ),
    )


def resolve_secret(*, current: str, new: str, clear: bool) -> str:
    """The value to store: cleared, replaced, or kept."""
    if clear:
        return ""
    return new or current
