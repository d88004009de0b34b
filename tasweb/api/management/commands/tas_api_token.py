"""Print the REST API token of a user, creating the token (and with --create the user)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from tasweb.api.services import api_token_create


class Command(BaseCommand):
    help = ("Print the REST API token of USER (send it as `Authorization: Token <key>`); creates the token "
            "when the user has none.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user when it does not exist")
        parser.add_argument("--rotate", action="store_true", help="replace the user's token with a new one")

    def handle(self, *args, username: str, create: bool, rotate: bool, **options) -> None:
        try:
            token, created = api_token_create(username=username, create_user=create, rotate=rotate)
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        if created:
            self.stderr.write(f"created user {username!r}")
        self.stdout.write(token.key)
