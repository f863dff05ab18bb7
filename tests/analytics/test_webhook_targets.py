"""Which webhook addresses a rule may post to: the judgement alone, every address form."""

from __future__ import annotations

import pytest

from retrylens.analytics.webhook_targets import webhook_refusal


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://127.1/x",
        "http://2130706433/x",  # loopback, short and integer forms
        "http://[::ffff:127.0.0.1]/x",  # IPv4 carried in IPv6
        "http://[fe80::1%25eth0]/x",
        "http://192.168.1.10/x",
        "http://172.16.0.1/x",
        "http://100.64.0.1/x",
        "http://localhost./x",
        "HTTP://LOCALHOST/x",
    ],
)
def test_inward_addresses_are_refused_with_the_setting_that_allows_them(url: str) -> None:
    reason = webhook_refusal(url)
    assert reason is not None and "RETRYLENS_ALERT_WEBHOOK_HOSTS" in reason, url


@pytest.mark.parametrize(
    "url",
    ["https://8.8.8.8/hook", "https://[2606:4700::1111]/hook", "https://no-such-host.invalid/hook"],
)  # unresolved: the post-time check decides
def test_public_and_unresolved_addresses_pass(url: str) -> None:
    assert webhook_refusal(url) is None


def test_a_listed_host_passes_however_it_is_written() -> None:
    assert webhook_refusal("http://Relay.Internal./hook", ["relay.internal"]) is None
    assert webhook_refusal("http://[::1]:9/hook", ["[::1]:9"]) is None
    assert webhook_refusal("http://[::1]:9/hook", ["::1"]) is not None  # a bare IPv6 entry has no port: 80/443 only
    assert webhook_refusal("http://127.0.0.1/hook", ["127.0.0.2"]) is not None


@pytest.mark.parametrize(("url", "allowed", "passes"), [
    ("http://127.0.0.1:9000/hook", "127.0.0.1:9000", True),
    ("http://127.0.0.1:8123/?query=DROP", "127.0.0.1:9000", False),  # the relay's host, ClickHouse's port
    ("http://127.0.0.1:8123/", "127.0.0.1", False),  # a host alone allows the default ports only
    ("http://127.0.0.1/hook", "127.0.0.1", True),
    ("https://relay.internal/hook", "relay.internal", True),
    ("https://relay.internal:8443/hook", "relay.internal:*", True),
    ("http://[::1]:9000/hook", "[::1]:9000", True),
    ("http://[::1]:9001/hook", "[::1]:9000", False),
])
def test_the_allow_list_matches_the_host_and_the_port(url: str, allowed: str, passes: bool) -> None:
    """Allowing a relay on one port of a host must not open the host's other ports (ClickHouse, admin)."""
    assert (webhook_refusal(url, [allowed]) is None) is passes


def test_a_url_without_a_host_is_refused() -> None:
    assert "no host" in (webhook_refusal("http:///hook") or "")
