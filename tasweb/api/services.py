"""Writes of the API app: access tokens."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def api_token_create(*, username: str, create_user: bool = False, rotate: bool = False) -> tuple[Token, bool]:
    """The API token of `username` (created if it has none, or anew when `rotate`); the flag
    says whether the user was created. Raises LookupError when the user does not exist and
    `create_user` is off."""
    users = get_user_model()
    user = users.objects.filter(**{users.USERNAME_FIELD: username}).first()
    created = False
    if user is None:
        if not create_user:
            raise LookupError(f"user {username!r} does not exist (pass --create to create it)")
        user = users.objects.create_user(**{users.USERNAME_FIELD: username})
        user.set_unusable_password()
        user.save()
        created = True
    if rotate:
        Token.objects.filter(user=user).delete()
    token, _ = Token.objects.get_or_create(user=user)
    return token, created
