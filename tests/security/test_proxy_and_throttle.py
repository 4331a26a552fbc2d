"""Client addresses behind a proxy, from one setting (FAULTLINE_NUM_PROXIES), for throttling and log-in lock-outs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.test import Client

from conftest import PASSWORD

PROXY = "10.0.0.5"  # what REMOTE_ADDR is for every request that came through the proxy


def _anon_get(client: Client, xff: str | None, remote: str = "203.0.113.7") -> int:
    extra = {"REMOTE_ADDR": remote}
    if xff is not None:
        extra["HTTP_X_FORWARDED_FOR"] = xff
    return client.get("/api/v1/studies/", **extra).status_code


def _anon_limit() -> int:
    return int(django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon"].split("/")[0])


def test_rotating_x_forwarded_for_does_not_escape_the_anonymous_throttle(db, settings):
    settings.FAULTLINE_NUM_PROXIES = 0  # no proxy: the header is the client's to forge
    client = Client()
    codes = [_anon_get(client, f"198.51.100.{n % 250}, 192.0.2.{n % 200}") for n in range(_anon_limit() + 5)]
    assert codes[0] == 401 and codes[-1] == 429


def test_behind_one_proxy_each_client_is_throttled_on_its_own(db, settings):
    settings.FAULTLINE_NUM_PROXIES = 1
    client = Client()
    limit = _anon_limit()
    # The proxy appends the address it saw; whatever the client put before it is ignored.
    codes = [_anon_get(client, f"6.6.6.{n % 250}, 198.51.100.1", remote=PROXY) for n in range(limit + 2)]
    assert codes[-1] == 429
    assert _anon_get(client, "198.51.100.2", remote=PROXY) == 401  # another client behind the same proxy


def _fail(client: Client, username: str, ip: str, via_proxy: bool = True) -> int:
    extra = {"REMOTE_ADDR": PROXY, "HTTP_X_FORWARDED_FOR": ip} if via_proxy else {"REMOTE_ADDR": ip}
    return client.post("/login/", {"username": username, "password": "wrong"}, **extra).status_code


def _login(username: str, ip: str, via_proxy: bool = True) -> int:
    extra = {"REMOTE_ADDR": PROXY, "HTTP_X_FORWARDED_FOR": ip} if via_proxy else {"REMOTE_ADDR": ip}
    return Client().post("/login/", {"username": username, "password": PASSWORD}, **extra).status_code


def test_one_client_behind_the_proxy_cannot_lock_everyone_out(settings, alice):
    settings.FAULTLINE_NUM_PROXIES = 1
    attacker = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _fail(attacker, "alice", "198.51.100.66")
    assert _login("alice", "198.51.100.66") == 429  # the attacker's address is locked for alice
    assert _login("alice", "198.51.100.10") == 302  # alice, from her own address behind the same proxy


def test_password_spraying_from_one_address_is_stopped(settings, alice, django_user_model):
    settings.FAULTLINE_NUM_PROXIES = 0
    sprayer = Client()
    for n in range(settings.FAULTLINE_LOGIN_IP_FAILURE_LIMIT):
        django_user_model.objects.create_user(username=f"user{n}", password=PASSWORD)
        assert _fail(sprayer, f"user{n}", "198.51.100.99", via_proxy=False) == 200  # one try per username
    response = sprayer.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="198.51.100.99")
    assert response.status_code == 429
    assert "from this address" in response.content.decode()
    assert "_auth_user_id" not in sprayer.session
    assert _login("alice", "198.51.100.100", via_proxy=False) == 302  # other addresses are unaffected


def test_one_variable_sets_drf_and_axes():
    code = (
        "from django.conf import settings as s; from rest_framework.settings import api_settings as a; "
        "print(s.FAULTLINE_NUM_PROXIES, s.REST_FRAMEWORK['NUM_PROXIES'], a.NUM_PROXIES, s.AXES_CLIENT_IP_CALLABLE)"
    )
    env = {**os.environ, "FAULTLINE_NUM_PROXIES": "2", "FAULTLINE_DEV": "1"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=django_settings.BASE_DIR, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert out == ["2", "2", "2", "config.proxies.client_ip"]


@pytest.mark.parametrize(
    ("proxies", "xff", "expected"),
    [(0, "1.1.1.1", "203.0.113.7"), (1, "9.9.9.9, 1.1.1.1", "1.1.1.1"), (2, "9.9.9.9, 1.1.1.1, 10.0.0.9", "1.1.1.1"),
     (1, None, "203.0.113.7"), (3, "1.1.1.1", "1.1.1.1"), (1, " , ", "203.0.113.7"), (1, "not-an-ip", "203.0.113.7")],
)  # fmt: skip
def test_the_client_address_is_read_from_the_right(settings, rf, proxies, xff, expected):
    from config.proxies import client_ip

    settings.FAULTLINE_NUM_PROXIES = proxies
    extra = {"REMOTE_ADDR": "203.0.113.7"}
    if xff is not None:
        extra["HTTP_X_FORWARDED_FOR"] = xff
    assert client_ip(rf.get("/", **extra)) == expected
