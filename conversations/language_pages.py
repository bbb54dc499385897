"""The header's language menu: ``POST /settings/language/`` with ``language`` and
``next``. Signed in, the choice is saved in the user's settings (so it follows them to
every browser); either way it is kept in Django's language cookie, which the sign-in page
and LocaleMiddleware read."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from conversations import user_settings

__all__ = ["set_language"]


@login_not_required
@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    code = request.POST.get("language", "")
    if code not in {known for known, _name in settings.LANGUAGES}:
        return HttpResponseBadRequest(_("Unknown language."), content_type="text/plain")
    if request.user.is_authenticated:
        user_settings.settings_update(request.user, language=code)
    response = HttpResponseRedirect(_safe_next(request))
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        code,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE,
    )
    translation.activate(code)
    return response


def _safe_next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.headers.get("referer") or "/"
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if allowed else "/"
