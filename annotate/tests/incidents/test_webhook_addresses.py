"""Webhook destinations: IPv6 spellings of loopback and private IPv4 addresses are refused like those addresses."""

from __future__ import annotations

import pytest

from annotate.incidents.webhooks import WebhookRefused, webhook_destination


@pytest.fixture(autouse=True)
def public_only(settings):
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = False
    settings.FAULTLINE_DEV = False  # the dev server may allow loopback receivers; production never does


@pytest.mark.parametrize(
    "url",
    [
        "http://[::7f00:1]/",  # IPv4-compatible 127.0.0.1
        "http://[::a00:1]/",  # IPv4-compatible 10.0.0.1
        "http://[64:ff9b::7f00:1]/",  # NAT64 well-known prefix, 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 to the cloud metadata address 169.254.169.254
        "http://[64:ff9b:1::c0a8:1]/",  # the local-use NAT64 prefix, 192.168.0.1
        "http://[2002:7f00:1::1]/",  # 6to4 of 127.0.0.1
        "http://[2002:a9fe:a9fe::1]/",  # 6to4 of 169.254.169.254
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
        "http://[::ffff:7f00:1]/",
        "http://[::1]/",
        "http://[fd00::1]/",
        "http://127.0.0.1/",
    ],
)
def test_it_refuses_ipv6_spellings_of_loopback_and_private_addresses(url):
    with pytest.raises(WebhookRefused, match="public addresses only"):
        webhook_destination(url)


@pytest.mark.parametrize("url", ["http://[64:ff9b::808:808]/", "http://[2002:808:808::1]/", "http://8.8.8.8/"])
def test_it_still_accepts_public_addresses_however_spelt(url):
    _host, port, addresses = webhook_destination(url)
    assert port == 80 and addresses
