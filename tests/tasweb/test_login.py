"""Signing in is bounded: after TAS_LOGIN_MAX_FAILURES wrong passwords for a username or from
an address, further attempts (even the right password) are refused for the window."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

from tasweb.core.login import failure_keys

pytestmark = [pytest.mark.services, pytest.mark.django_db]

URL = "/accounts/login/"


@pytest.fixture(autouse=True)
def _no_failures_left_over():
    keys = failure_keys(username="mallory", address="127.0.0.1") + failure_keys(username="other",
                                                                                 address="10.0.0.7")
    cache.delete_many(keys)
    yield
    cache.delete_many(keys)


@pytest.fixture
def mallory(db):
    return get_user_model().objects.create_user(username="mallory", password="right-password")


def sign_in(client: Client, password: str, username: str = "mallory", address: str = "127.0.0.1"):
    return client.post(URL, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_thirty_wrong_passwords_then_the_right_one_is_refused(mallory, settings):
    settings.TAS_LOGIN_MAX_FAILURES = 10
    client = Client()
    for _ in range(30):
        assert sign_in(client, "wrong").status_code == 200  # the form again, with its error
    refused = sign_in(client, "right-password")
    assert refused.status_code == 200
    assert "_auth_user_id" not in client.session
    assert b"Too many failed sign-ins" in refused.content
    # from another address the username is still refused: the guesses were against it
    assert "_auth_user_id" not in (sign_in(Client(), "right-password", address="10.0.0.7").client.session)


def test_a_few_wrong_passwords_do_not_lock_out(mallory, settings):
    settings.TAS_LOGIN_MAX_FAILURES = 10
    client = Client()
    for _ in range(3):
        sign_in(client, "wrong")
    assert sign_in(client, "right-password").status_code == 302
    assert client.session["_auth_user_id"] == str(mallory.pk)


def test_the_lock_lapses_with_the_window(mallory, settings):
    settings.TAS_LOGIN_MAX_FAILURES = 2
    settings.TAS_LOGIN_FAILURE_WINDOW_SECONDS = 1
    client = Client()
    sign_in(client, "wrong")
    sign_in(client, "wrong")
    assert sign_in(client, "right-password").status_code == 200
    cache.delete_many(failure_keys(username="mallory", address="127.0.0.1"))  # as the window's end does
    assert sign_in(client, "right-password").status_code == 302
