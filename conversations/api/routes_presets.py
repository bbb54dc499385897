"""Presets: a chat's set-up to reuse and share (:mod:`conversations.presets` checks and
keeps them). Yours, your groups' and everyone's are listed; only yours change (another's
is read-only, a 404 to write); a chat starts from one with ``POST /api/conversations``
``{preset: id}``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from conversations import presets
from conversations.api.docs import errors
from conversations.api.params import PresetId
from conversations.api.schemas import PresetChange, PresetList, PresetNew, PresetOut
from conversations.models import Preset

router = Router(tags=["presets"])


def preset_out(preset: Preset, user: Any) -> dict[str, Any]:
    model = preset.model
    return {
        "id": preset.pk,
        "name": preset.name,
        "description": preset.description,
        "owner": preset.owner.get_username() if preset.owner is not None else None,
        "read_only": preset.owner_id != user.pk,
        "model": {"id": model.pk, "name": str(model)} if model is not None else None,
        "system_prompt": preset.system_prompt,
        "tools": preset.tools,
        "knowledge": [{"id": b.pk, "name": b.name} for b in preset.knowledge.all()],
        "params": preset.params or {},
        "mode": preset.mode,
        "starters": preset.starters or [],
        "groups": [{"id": g.pk, "name": g.name} for g in preset.shared_groups.all()],
        "created_at": preset.created_at,
        "updated_at": preset.updated_at,
    }


def _given(payload: Any) -> dict[str, Any]:
    out = {name: getattr(payload, name) for name in payload.model_fields_set}
    if "params" in out and out["params"] is not None:
        params = out["params"]
        out["params"] = {name: getattr(params, name) for name in params.model_fields_set}
    return out


@router.get(
    "/presets",
    response={200: PresetList, **errors()},
    operation_id="listPresets",
    summary="Presets you may use: yours, your groups' and everyone's",
    url_name="api_presets",
)
def preset_list(request: HttpRequest):
    found = presets.presets_for(request.user).order_by("name", "id")
    return {"presets": [preset_out(p, request.user) for p in found]}


@router.post(
    "/presets",
    response={201: PresetOut, **errors(400)},
    operation_id="createPreset",
    summary="Create a preset (checked with your rights: models, tools, knowledge, groups)",
)
def preset_create(request: HttpRequest, payload: PresetNew):
    preset = presets.preset_create(request.user, _given(payload))
    return Status(
        201, preset_out(presets.preset_get_readable(request.user, preset.pk), request.user)
    )


@router.get(
    "/presets/{id:preset_id}",
    response={200: PresetOut, **errors(404)},
    operation_id="getPreset",
    summary="A preset you may use",
    url_name="api_preset",
)
def preset_get(request: HttpRequest, preset_id: PresetId):
    return preset_out(presets.preset_get_readable(request.user, preset_id), request.user)


@router.patch(
    "/presets/{id:preset_id}",
    response={200: PresetOut, **errors(400, 404)},
    operation_id="updatePreset",
    summary="Change your preset (the fields given; another's is a 404)",
)
def preset_update(request: HttpRequest, preset_id: PresetId, payload: PresetChange):
    preset = presets.preset_get_writable(request.user, preset_id)
    presets.preset_update(preset, request.user, _given(payload))
    return preset_out(presets.preset_get_readable(request.user, preset_id), request.user)


@router.delete(
    "/presets/{id:preset_id}",
    response={204: None, **errors(404)},
    operation_id="deletePreset",
    summary="Delete your preset (its chats keep their settings)",
)
def preset_delete(request: HttpRequest, preset_id: PresetId):
    presets.preset_delete(presets.preset_get_writable(request.user, preset_id))
    return HttpResponse(status=204)
