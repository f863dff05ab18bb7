"""Every non-global address is refused, the IPv4 address an IPv6 one carries included."""

from __future__ import annotations

import ipaddress

import pytest

from retrylens.analytics.public_addresses import carried_ipv4, is_public
from retrylens.analytics.webhook_targets import webhook_refusal


@pytest.mark.parametrize(
    ("address", "carries"),
    [
        ("::127.0.0.1", "127.0.0.1"),  # IPv4-compatible: ipaddress alone calls it global
        ("::ffff:127.0.0.1", "127.0.0.1"),  # IPv4-mapped
        ("::169.254.169.254", "169.254.169.254"),  # the metadata service, compatible form
        ("64:ff9b::10.0.0.1", "10.0.0.1"),  # NAT64: the network's own gateway translates it
        ("2002:c0a8:0101::1", "192.168.1.1"),  # 6to4
    ],
)
def test_an_ipv6_address_carrying_a_private_ipv4_one_is_not_public(address: str, carries: str) -> None:
    ip = ipaddress.ip_address(address)
    assert ipaddress.ip_address(carries) in carried_ipv4(ip)
    assert not is_public(ip)


@pytest.mark.parametrize(
    "url",
    ["http://[::127.0.0.1]/x", "http://[::7f00:1]/x", "http://[::169.254.169.254]/latest/meta-data",
     "http://[64:ff9b::7f00:1]/x", "http://[2002:7f00:1::]/x", "http://[::]/x", "http://0.0.0.0/x",
     "http://[fc00::1]/x", "http://[ff02::1]/x", "http://224.0.0.1/x", "http://240.0.0.1/x"],
)
def test_a_webhook_to_any_non_global_address_is_refused(url: str) -> None:
    reason = webhook_refusal(url)
    assert reason is not None and "non-public address" in reason, url


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8",
                                     "2002:0808:0808::1"])
def test_public_addresses_and_public_ones_carried_stay_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address)), address
