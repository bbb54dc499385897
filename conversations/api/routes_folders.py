"""Folders of conversations: list, create, read, rename or move, delete
(:mod:`conversations.organise.folders` does the work).

Folders nest one level deep; deleting one keeps its conversations (moved to its parent,
or out of any folder). A conversation goes into a folder with ``PATCH
/api/conversations/{id}`` ``{"folder": id}``. Another user's folder is a 404.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from conversations.api.docs import errors
from conversations.api.params import FolderId
from conversations.api.schemas import FolderChange, FolderCreate, FolderOut
from conversations.models import Folder
from conversations.organise import folders

router = Router(tags=["folders"])


def _folder(folder: Folder, conversation_count: int | None = None) -> dict[str, Any]:
    count = folder.conversations.count() if conversation_count is None else conversation_count
    return {
        "id": folder.pk,
        "name": folder.name,
        "parent": folder.parent_id,
        "conversation_count": count,
        "created_at": folder.created_at,
    }


@router.get(
    "/folders",
    response={200: list[FolderOut]},
    operation_id="listFolders",
    summary="Your folders, by name (top-level folders and sub-folders alike)",
    url_name="api_folders",
)
def folder_list(request: HttpRequest):
    rows = Folder.objects.filter(owner=request.user).annotate(count=Count("conversations"))
    return [_folder(folder, folder.count) for folder in rows.order_by("name", "id")]


@router.post(
    "/folders",
    response={201: FolderOut, **errors(400, 404)},
    operation_id="createFolder",
    summary="Create a folder, at the top level or inside a top-level folder (`parent`)",
)
def folder_create(request: HttpRequest, payload: FolderCreate):
    folder = folders.folder_create(owner=request.user, name=payload.name, parent_id=payload.parent)
    return Status(201, _folder(folder, 0))


@router.get(
    "/folders/{id:folder_id}",
    response={200: FolderOut, **errors(404)},
    operation_id="getFolder",
    summary="A folder",
    url_name="api_folder",
)
def folder_get(request: HttpRequest, folder_id: FolderId):
    return _folder(folders.folder_get(user=request.user, folder_id=folder_id))


@router.patch(
    "/folders/{id:folder_id}",
    response={200: FolderOut, **errors(400, 404)},
    operation_id="updateFolder",
    summary="Rename a folder, or move it (`parent`: a top-level folder, or null for the top)",
)
def folder_update(request: HttpRequest, folder_id: FolderId, payload: FolderChange):
    folder = folders.folder_get(user=request.user, folder_id=folder_id)
    given = payload.model_fields_set
    folders.folder_change(
        folder=folder,
        name=payload.name if "name" in given else None,
        parent_id=payload.parent,
        move="parent" in given,
    )
    return _folder(folder)


@router.delete(
    "/folders/{id:folder_id}",
    response={204: None, **errors(404)},
    operation_id="deleteFolder",
    summary="Delete a folder and its sub-folders; their conversations stay",
)
def folder_delete(request: HttpRequest, folder_id: FolderId):
    folders.folder_delete(folder=folders.folder_get(user=request.user, folder_id=folder_id))
    return HttpResponse(status=204)
