"""The page a cited passage opens: the chunk, its document, page and heading.

Only for someone who may read the chunk's knowledge base (a 404 for anyone else, as for
any object of another user)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from knowledge.models import Chunk
from knowledge.selectors import readable_bases


@require_GET
def passage(request: HttpRequest, chunk_id: int) -> HttpResponse:
    chunk = (
        Chunk.objects.select_related("document__base")
        .filter(pk=chunk_id, document__base__in=readable_bases(request.user))
        .first()
    )
    if chunk is None:
        raise Http404("no such passage")
    return render(request, "knowledge/passage.html", {"chunk": chunk})
