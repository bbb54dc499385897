"""What the user may use: models and tools."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from conversations.api.docs import errors
from conversations.api.outputs import model_out
from conversations.api.schemas import ModelList, ToolList
from llms.selectors import models_for_user
from tools.services import tools_available_for_user

router = Router(tags=["catalog"])


@router.get(
    "/models",
    response={200: ModelList, **errors()},
    operation_id="listModels",
    summary="Models you may use",
    url_name="api_models",
)
def model_list(request: HttpRequest):
    return {"models": [model_out(model) for model in models_for_user(user=request.user)]}


@router.get(
    "/tools",
    response={200: ToolList, **errors()},
    operation_id="listTools",
    summary="Tools your runs may use",
    url_name="api_tools",
)
def tool_list(request: HttpRequest):
    return {"tools": tools_available_for_user(user=request.user)}
