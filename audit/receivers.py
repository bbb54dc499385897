"""Events recorded from signals: sign-ins, failed sign-ins, group membership.

Failed sign-ins: Django sends ``user_login_failed`` after every backend refused, also when
django-axes's backend refused a locked-out client (Django catches its ``PermissionDenied``
and sends the signal), so each attempt is recorded. Only the username tried is kept: never
the password or any other credential.

Group membership (``group.joined``, ``group.left``): from ``m2m_changed`` on
``User.groups``, from either side and whoever changes it (the admin, a shell, a future SSO
or LDAP sync), so the sync gets its audit for free. The actor is whoever
:func:`audit.services.acting` names (the admin's audited views), else none (the system).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import m2m_changed

from audit import services
from core.loading import loading_backup

__all__ = ["connect"]


def on_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    services.record("auth.login", actor=user, target=user, request=request)


def on_login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs):
    user_model = get_user_model()
    tried = credentials.get(user_model.USERNAME_FIELD) or credentials.get("username") or ""
    tried = str(tried)[:150]
    services.record(
        "auth.login_failed",
        actor=None,
        actor_name=tried,
        target_type=user_model._meta.label_lower,
        target_label=tried,
        request=request,
    )


def on_groups_changed(
    sender: Any,
    instance: Any,
    action: str,
    reverse: bool,
    model: Any,
    pk_set: set[Any] | None,
    **kwargs: Any,
) -> None:
    if loading_backup():  # a restore: the backup holds the original events
        return
    if action == "pre_clear":
        # The rows a clear() removes are gone by post_clear: remember them now.
        pks = set((instance.user_set if reverse else instance.groups).values_list("pk", flat=True))
        instance._audit_cleared = pks
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if action == "post_clear":
        pk_set = getattr(instance, "_audit_cleared", set())
    if not pk_set:
        return
    verb = "group.joined" if action == "post_add" else "group.left"
    actor, client = services.current_client()
    others = model._default_manager.filter(pk__in=pk_set).order_by("pk")
    for other in others:
        user, group = (other, instance) if reverse else (instance, other)
        before, after = (None, group.name) if verb == "group.joined" else (group.name, None)
        services.record(
            verb,
            actor=actor,
            target=user,
            changes={"group": [before, after]},
            client=client,
        )


def connect() -> None:
    user_logged_in.connect(on_logged_in, dispatch_uid="audit.login")
    user_login_failed.connect(on_login_failed, dispatch_uid="audit.login_failed")
    m2m_changed.connect(
        on_groups_changed, sender=get_user_model().groups.through, dispatch_uid="audit.groups"
    )
