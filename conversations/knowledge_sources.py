"""A knowledge base's document from a URL: the page fetched once, through the SSRF guard
(:mod:`tools.net`), and kept as a file like an upload (HTML as Markdown, as ``web_fetch``
converts it; PDF, Word and text as they come).

It lives here, not in :mod:`knowledge`, because the knowledge app sits below ``tools``;
the JSON API (``api/routes_knowledge.py``) and the Knowledge pages (``knowledge_pages.py``)
both call it, so the checks and the messages a user reads are the same in both.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.translation import gettext as _

from core.errors import ApplicationError
from files.services import sanitize_name
from files.uploads import file_max_bytes
from knowledge import services
from knowledge.models import Document, KnowledgeBase
from tools.builtin.web_fetch import ACCEPT, HTML_TYPES, html_to_markdown
from tools.net.guard import NetPolicy, UnsafeURLError
from tools.net.safehttp import FOLLOW, FetchError, safe_request

__all__ = ["FETCH_TIMEOUT", "document_add_from_url", "fetched"]

FETCH_TIMEOUT = 20.0


def _refused(message: str) -> ApplicationError:
    return ApplicationError(message, extra={"url": [message]})


def fetched(url: str) -> SimpleUploadedFile:
    """The page at ``url`` as a file to store: HTML as Markdown under its title, anything
    else as its bytes (``files.services.store`` decides what they are)."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise _refused(_("Give an http:// or https:// URL."))
    limit = file_max_bytes()
    try:
        response = async_to_sync(safe_request)(
            "GET", url, policy=NetPolicy(), max_bytes=limit, timeout=FETCH_TIMEOUT,
            headers={"Accept": ACCEPT}, cross_origin=FOLLOW,
        )  # fmt: skip
    except UnsafeURLError as exc:
        raise _refused(_("This URL is refused: %(reason)s") % {"reason": exc}) from None
    except FetchError as exc:
        raise _refused(_("The page could not be fetched: %(reason)s") % {"reason": exc}) from None
    if response.status_code >= 400:
        raise _refused(_("The page answered HTTP %(status)s.") % {"status": response.status_code})
    if response.truncated:
        raise _refused(_("The page is larger than the file size limit."))
    where = urlsplit(response.url)
    last = where.path.rstrip("/").rpartition("/")[2]
    if response.content_type in HTML_TYPES:
        title, markdown = html_to_markdown(response.content, response.charset)
        name = sanitize_name(title or f"{where.hostname}{where.path}".rstrip("/"))
        text = f"# {title}\n\n{markdown}" if title else markdown
        return SimpleUploadedFile(
            name if name.endswith(".md") else name + ".md", text.encode(), "text/markdown"
        )
    return SimpleUploadedFile(
        sanitize_name(last or where.hostname or "page"),
        response.content,
        response.content_type or "application/octet-stream",
    )


def document_add_from_url(base: KnowledgeBase, url: str) -> Document:
    """Fetch ``url`` now and add it to ``base`` (indexed in the background); an
    ``ApplicationError`` on the field ``url`` says why nothing was added."""
    url = url.strip()
    return services.document_add(base, fetched(url), source_url=url)
