"""The Provider admin's "Add a connection" page: a form over :mod:`llms.connection_setup`.

Two posts on one page: *Fetch models* reads the endpoint's list (an error goes beside the
field it is about), *Add* creates the provider and the ticked models, probes and applies,
and shows the result. The key typed at the first post is carried to the second as a
Fernet token (``core.crypto``), never as text: the page never shows it back.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables

from core import crypto
from core.errors import ApplicationError
from llms.connection_setup import (
    connection_add,
    connection_kinds,
    connection_provider,
    endpoint_models_fetch,
)
from llms.models import LLMModel, Provider

__all__ = ["ConnectionAdminMixin", "ConnectionForm"]

FIELDS = ("name", "kind", "base_url", "api_key", "models", "default")


class ConnectionForm(forms.Form):
    """Name, kind, base URL and key; once the list is fetched, the models and the default."""

    name = forms.CharField(
        label=_("Name"),
        max_length=100,
        help_text=_("The provider's name in the admin, e.g. openai."),
    )
    kind = forms.ChoiceField(label=_("Kind"), choices=connection_kinds, initial="openai")
    base_url = forms.CharField(
        label=_("Base URL"),
        max_length=500,
        help_text=_("Ends in /v1 for OpenAI-compatible servers, e.g. https://api.openai.com/v1"),
    )
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Stored encrypted, never shown again. Leave empty if the server needs none."),
    )
    key_token = forms.CharField(required=False, widget=forms.HiddenInput)
    listed = forms.CharField(required=False, widget=forms.HiddenInput)
    models = forms.MultipleChoiceField(
        label=_("Models to add"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Each one is probed (a few seconds to a minute) and its abilities applied."),
    )
    default = forms.ChoiceField(label=_("Make the default model"), required=False)

    def __init__(self, *args: Any, listed: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed = listed
        self.fields["models"].choices = [(m, m) for m in listed]
        keep = [("", gettext("No: keep the current default"))]
        self.fields["default"].choices = keep + [(m, m) for m in listed]


def listed_models(text: str) -> tuple[str, ...]:
    """The fetched list carried by the form (a JSON list); the service checks it again."""
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(str(item) for item in value if isinstance(item, str) and item.strip())


class ConnectionAdminMixin:
    """For the Provider admin: the ``connect/`` URL and the changelist's link to it."""

    def get_urls(self) -> list[Any]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_connect"  # type: ignore[attr-defined]
        view = self.admin_site.admin_view(self.connect_view)  # type: ignore[attr-defined]
        return [path("connect/", view, name=name), *super().get_urls()]  # type: ignore[misc]

    def may_connect(self, request: HttpRequest) -> bool:
        """Adding a connection adds a provider and models: both permissions are needed."""
        user = request.user
        return self.has_add_permission(request) and user.has_perm(  # type: ignore[attr-defined]
            f"{LLMModel._meta.app_label}.add_{LLMModel._meta.model_name}"
        )

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        context = {"can_connect": self.may_connect(request), **(extra_context or {})}
        return super().changelist_view(request, context)  # type: ignore[misc]

    @method_decorator(sensitive_post_parameters("api_key", "key_token"))
    @method_decorator(sensitive_variables("api_key"))
    def connect_view(self, request: HttpRequest) -> HttpResponse:
        if not self.may_connect(request):
            raise PermissionDenied
        if request.method != "POST":
            return self._render(request, ConnectionForm())
        listed = listed_models(request.POST.get("listed", ""))
        form = ConnectionForm(request.POST, listed=listed)
        if not form.is_valid():
            return self._render(request, form)
        data = form.cleaned_data
        api_key = data["api_key"] or self._key_from_token(form)
        if form.errors:
            return self._render(request, form)
        try:
            connection_provider(name=data["name"], base_url=data["base_url"], kind=data["kind"])
            if "_add" in request.POST and listed:
                added = connection_add(
                    name=data["name"],
                    base_url=data["base_url"],
                    api_key=api_key,
                    kind=data["kind"],
                    model_ids=data["models"],
                    default=data["default"] or None,
                )
                return self._render_result(request, added)
            listed = endpoint_models_fetch(base_url=data["base_url"], api_key=api_key)
        except ApplicationError as exc:
            field = exc.extra.get("field")
            form.add_error(field if field in FIELDS else None, exc.message)
            return self._render(request, form)
        initial = {
            **{key: data[key] for key in ("name", "kind", "base_url")},
            "key_token": crypto.encrypt(api_key) if api_key else "",
            "listed": json.dumps(list(listed)),
        }
        return self._render(request, ConnectionForm(initial=initial, listed=listed))

    @staticmethod
    def _key_from_token(form: ConnectionForm) -> str | None:
        token = form.cleaned_data.get("key_token") or ""
        if not token:
            return None
        try:
            return crypto.decrypt(token)
        except ValueError:
            form.add_error("api_key", gettext("This form is too old: enter the API key again."))
            return None

    def _context(self, request: HttpRequest, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),  # type: ignore[attr-defined]
            "opts": Provider._meta,
            "title": gettext("Add a connection"),
            **extra,
        }

    def _render(self, request: HttpRequest, form: ConnectionForm) -> HttpResponse:
        key_kept = bool(form["key_token"].value())
        context = self._context(request, form=form, listed=form.listed, key_kept=key_kept)
        return TemplateResponse(request, "admin/llms/provider/connect.html", context)

    def _render_result(self, request: HttpRequest, added: Any) -> HttpResponse:
        context = self._context(request, added=added)
        return TemplateResponse(request, "admin/llms/provider/connect_result.html", context)
