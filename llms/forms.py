"""Admin forms: write-only secrets, abilities and roles as checkboxes.

Secrets (API keys, secret headers, secret tool settings) are never rendered back into a
page: the form shows whether one is set and its last four characters; an empty submit
keeps the stored value, a "clear" checkbox removes it (core/forms.py).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.errors import ApplicationError
from core.forms import resolve_secret, write_only_field
from llms.models import (
    ABILITY_FLAGS,
    JSON_SCHEMA_DIALECTS,
    ROLE_LABELS,
    ROLES,
    EmbeddingModel,
    LLMModel,
    Provider,
    RoleAssignment,
)
from llms.probe import probe_summary
from llms.services import embedding_model_check, role_assignment_check

__all__ = [
    "EmbeddingModelAdminForm",
    "LLMModelAdminForm",
    "ProviderAdminForm",
    "RoleAssignmentAdminForm",
    "RoleAssignmentInlineFormSet",
]

ABILITY_LABELS = {
    "tool_call": _("Native tool calls"),
    "tool_choice": _("Forced tool_choice"),
    "json_mode": _("JSON mode (response_format json_object)"),
    "json_schema": _("JSON schema (response_format json_schema)"),
    "streaming": _("Streaming"),
    "vision": _("Vision (image input)"),
}


class ProviderAdminForm(forms.ModelForm):
    new_api_key = forms.CharField(required=False)  # replaced per instance in __init__
    clear_api_key = forms.BooleanField(label=_("Clear the stored API key"), required=False)
    new_extra_headers = forms.CharField(required=False)
    clear_extra_headers = forms.BooleanField(label=_("Clear the extra headers"), required=False)

    class Meta:
        model = Provider
        fields = ["name", "kind", "base_url", "timeout"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["new_api_key"] = write_only_field(
            label=gettext("API key"), hint=self.instance.api_key_hint
        )
        self.fields["new_extra_headers"] = write_only_field(
            label=gettext("Extra headers"),
            hint=(
                gettext(
                    'A JSON object of HTTP headers sent with every request, e.g. {"X-Title": '
                    '"agentsite"}; values are stored encrypted.'
                )
                + " "
                + self.instance.extra_headers_hint
            ),
            multiline=True,
        )

    def clean_new_extra_headers(self) -> dict[str, str] | None:
        raw = self.cleaned_data.get("new_extra_headers") or ""
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            raise forms.ValidationError(
                gettext('Enter a JSON object, e.g. {"X-Title": "x"}.')
            ) from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise forms.ValidationError(
                gettext("Enter a JSON object of header names to string values.")
            )
        return value

    def save(self, commit: bool = True) -> Provider:
        provider = super().save(commit=False)
        data = self.cleaned_data
        provider.api_key = resolve_secret(
            current=provider.api_key,
            new=data.get("new_api_key") or "",
            clear=bool(data.get("clear_api_key")),
        )
        if data.get("clear_extra_headers"):
            provider.extra_headers = {}
        elif data.get("new_extra_headers") is not None:
            provider.extra_headers = data["new_extra_headers"]
        if commit:
            provider.save()
        return provider


class LLMModelAdminForm(forms.ModelForm):
    abilities = forms.MultipleChoiceField(
        label=_("Declared abilities"),
        choices=[(flag, ABILITY_LABELS[flag]) for flag in ABILITY_FLAGS],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=_("What the engine may rely on. Probe the model to verify them."),
    )
    json_schema_dialect = forms.ChoiceField(
        label=_("JSON schema dialect"),
        choices=[("", _("(default: openai)"))] + [(d, d) for d in JSON_SCHEMA_DIALECTS],
        required=False,
        help_text=_("How response_format carries a schema: openai (also vLLM) or llamacpp."),
    )
    roles = forms.MultipleChoiceField(
        label=_("Roles"),
        choices=[(role, ROLE_LABELS[role]) for role in ROLES],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=_(
            "Plan steps ask for a fast or reasoning model by role. Role assignments (per "
            "group, or for everyone) take precedence; these boxes are the last fallback."
        ),
    )

    class Meta:
        model = LLMModel
        fields = [
            "provider",
            "model_id",
            "display_name",
            "abilities",
            "context_window",
            "max_output_tokens",
            "roles",
            "is_default",
            "enabled",
            "allowed_groups",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        declared = self.instance.abilities if isinstance(self.instance.abilities, dict) else {}
        self._was_default = bool(self.instance.pk and self.instance.is_default)
        if not self.is_bound:
            self.initial["abilities"] = [f for f in ABILITY_FLAGS if declared.get(f) is True]
            self.initial["json_schema_dialect"] = declared.get("json_schema_dialect", "")

    def clean_abilities(self) -> dict[str, Any]:
        chosen = set(self.cleaned_data.get("abilities") or ())
        return {flag: flag in chosen for flag in ABILITY_FLAGS}

    def clean_roles(self) -> list[str]:
        chosen = set(self.cleaned_data.get("roles") or ())
        return [role for role in ROLES if role in chosen]

    # Prices: what runs cost is computed from them (llms.pricing), so nonsense is refused.

    def _price(self, name: str) -> Decimal | None:
        price = self.cleaned_data.get(name)
        if price is not None and price < 0:
            raise forms.ValidationError(gettext("A price cannot be negative (empty: not priced)."))
        return price

    def clean_input_price(self) -> Decimal | None:
        return self._price("input_price")

    def clean_output_price(self) -> Decimal | None:
        return self._price("output_price")

    def clean_currency(self) -> str:
        code = (self.cleaned_data.get("currency") or "").strip().upper()
        if not re.fullmatch(r"[A-Z]{3}", code):
            raise forms.ValidationError(
                gettext("Enter a three-letter ISO 4217 code, e.g. USD or EUR.")
            )
        return code

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        abilities = data.get("abilities")
        if isinstance(abilities, dict) and data.get("json_schema_dialect"):
            abilities["json_schema_dialect"] = data["json_schema_dialect"]
        if self._was_default and not data.get("is_default"):
            self.add_error(
                "is_default",
                gettext("There must be one default model: make another model the default instead."),
            )
        return data


class EmbeddingModelAdminForm(forms.ModelForm):
    """Saving an enabled model makes one test call (its error shows on the form) and
    fills in the vector length when left empty."""

    class Meta:
        model = EmbeddingModel
        fields = ["provider", "model_id", "dimensions", "batch_size", "enabled"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors or not cleaned.get("enabled"):
            return cleaned
        trial = EmbeddingModel(
            provider=cleaned["provider"],
            model_id=cleaned["model_id"],
            dimensions=cleaned.get("dimensions"),
            batch_size=cleaned.get("batch_size") or 1,
        )
        try:
            cleaned["dimensions"] = cleaned.get("dimensions") or embedding_model_check(model=trial)
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message) from None
        return cleaned


class ModelWithProbeChoiceField(forms.ModelChoiceField):
    """Model choices labelled with their last probe: admins pick roles by what works."""

    def label_from_instance(self, obj: LLMModel) -> str:
        return f"{obj} ({obj.provider.name}) — {probe_summary(obj)}"


class RoleAssignmentAdminForm(forms.ModelForm):
    """An assignment, refused when the group could not use the model (the service's rule)."""

    class Meta:
        model = RoleAssignment
        fields = ["role", "group", "model"]
        field_classes = {"model": ModelWithProbeChoiceField}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        model_field = self.fields["model"]
        model_field.queryset = LLMModel.objects.select_related("provider")  # type: ignore[attr-defined]
        group_field = self.fields.get("group")
        if isinstance(group_field, forms.ModelChoiceField):
            group_field.empty_label = gettext("Everyone (the fallback)")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        role, model = data.get("role"), data.get("model")
        # "group" is missing only when it failed its own validation. On the Group page's
        # inline it is the page's group (possibly not saved yet).
        if role and model is not None and "group" in data:
            try:
                role_assignment_check(role=role, group=data["group"], model=model)
            except ApplicationError as exc:
                self.add_error("model", exc.message)
        return data


class RoleAssignmentInlineFormSet(forms.BaseInlineFormSet):
    """One row per role on a Group page: partial unique constraints are not checked
    across the forms of a formset (Django checks only unconditional ones there)."""

    def clean(self) -> None:
        super().clean()
        seen: set[str] = set()
        for form in self.forms:
            if not getattr(form, "cleaned_data", None) or form.cleaned_data.get("DELETE"):
                continue
            role = form.cleaned_data.get("role")
            if role in seen:
                raise forms.ValidationError(
                    gettext("The role %(role)s is assigned twice.") % {"role": repr(role)}
                )
            if role:
                seen.add(role)
