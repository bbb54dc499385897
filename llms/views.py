"""The usage page: the signed-in user's tokens and their cost per day and per model over
7, 30 or 90 days, and what is left of today's quota. Thin: :mod:`llms.usage` reads it,
as for ``GET /api/usage``."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from llms.usage import PERIODS, period_days, report_for_user

TEMPLATE = "llms/usage.html"


@require_GET
def usage_page(request: HttpRequest) -> HttpResponse:
    """``?days=`` 7, 30 or 90; the page's own links ask for nothing else, so any other
    value shows the default period rather than an error."""
    days = period_days(request.GET.get("days"), strict=False)
    context = {"report": report_for_user(user=request.user, days=days), "periods": PERIODS}
    return render(request, TEMPLATE, context)
