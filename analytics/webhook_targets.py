"""Where an alert rule's webhook may post: public addresses, and the hosts the operator allows.

A rule's webhook URL is chosen by whoever holds a project's key, and the server posts to it
from inside its own network. Unchecked, a key holder could make the server POST to its cloud
metadata service, to ClickHouse's HTTP port or to the server's own operator routes
(server-side request forgery). So a rule's webhook may reach only globally routable
addresses (:func:`~.public_addresses.is_public`: the IPv4 address an IPv6 one carries
included), unless its host is listed in ``alert_webhook_hosts`` (an internal relay the
operator trusts). The server's own ``alert_webhook_url`` is the operator's choice and is not
checked.

The check runs when a rule is saved through the API (a 422 that says what to do) and again
before every post, because a name may resolve elsewhere by then. A name that does not resolve
when the rule is saved is accepted (DNS may be down); the check before the post decides.
Redirects are never followed (``httpx.post``'s default), so a public URL cannot bounce the
post inward. What remains: a name that resolves to a public address for the check and to a
private one a moment later for the post (DNS rebinding) is not caught.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from .public_addresses import Address, is_public

HOSTS_SETTING = "RETRYLENS_ALERT_WEBHOOK_HOSTS"


def webhook_refusal(
    url: str, allowed_hosts: Iterable[str] = (), *, field: str = "webhook_url"
) -> str | None:
    """Why the server must not post to ``url`` (``None``: it may); ``field`` is what the user called it."""
    host = (urlsplit(url).hostname or "").rstrip(".")
    if not host:
        return f"{field} {url!r} names no host"
    if host in {allowed.strip().strip("[]").rstrip(".").lower() for allowed in allowed_hosts}:
        return None
    inward = sorted(str(address) for address in _addresses(host) if not is_public(address))
    if inward:
        return (
            f"{field} host {host!r} is the non-public address {inward[0]}: the server does not post into "
            f"its own network unless the operator lists the host in {HOSTS_SETTING} "
            f'(a JSON list, e.g. ["{host}"])'
        )
    return None


def _addresses(host: str) -> set[Address]:
    """The addresses ``host`` is or resolves to (empty when it does not resolve)."""
    try:
        return {ipaddress.ip_address(host)}
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    addresses: set[Address] = set()
    for info in infos:
        try:
            addresses.add(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
        except ValueError:
            continue
    return addresses

