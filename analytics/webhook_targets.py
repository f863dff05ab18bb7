"""Where an alert rule's webhook may post: public addresses, and the hosts the operator allows.

A rule's webhook URL is chosen by whoever holds a project's key, and the server posts to it
from inside its own network. Unchecked, a key holder could make the server POST to its cloud
metadata service, to ClickHouse's HTTP port or to the server's own operator routes
(server-side request forgery). So a rule's webhook may reach only globally routable
addresses (:func:`~.public_addresses.is_public`: the IPv4 address an IPv6 one carries
included), unless its host and port are listed in ``alert_webhook_hosts`` (an internal
relay the operator trusts): ``relay.internal`` allows that host on the default ports (80,
443) only, ``relay.internal:9000`` on port 9000, ``relay.internal:*`` on any port — so
allowing a relay never also opens the ClickHouse or admin port of the same host. The
server's own ``alert_webhook_url`` is the operator's choice and is not
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
_DEFAULT_PORTS = {"http": 80, "https": 443}


def webhook_refusal(
    url: str, allowed_hosts: Iterable[str] = (), *, field: str = "webhook_url"
) -> str | None:
    """Why the server must not post to ``url`` (``None``: it may); ``field`` is what the user called it."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return f"{field} {url!r} names no host"
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower(), 0)
    except ValueError:
        return f"{field} {url!r} names no valid port"
    if any(_matches(entry, host, port) for entry in allowed_hosts):
        return None
    inward = sorted(str(address) for address in _addresses(host) if not is_public(address))
    if inward:
        shown = f"[{host}]" if ":" in host else host
        return (
            f"{field} host {host!r} is the non-public address {inward[0]}: the server does not post into "
            f"its own network unless the operator lists the host in {HOSTS_SETTING} "
            f'(a JSON list of host or host:port, e.g. ["{shown}:{port}"])'
        )
    return None


def _matches(entry: str, host: str, port: int) -> bool:
    """Whether an allow-list entry lets ``host:port`` through: ``host`` alone allows the scheme's
    default port only (80, 443), ``host:port`` that port, ``host:*`` any port."""
    entry = entry.strip().lower()
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        wanted = rest.removeprefix(":") or None
    elif entry.count(":") == 1:
        name, wanted = entry.split(":")
    else:  # a bare name, or a bare IPv6 address (its colons are not a port)
        name, wanted = entry, None
    if name.rstrip(".") != host.lower():
        return False
    if wanted == "*":
        return True
    if wanted is None:
        return port in _DEFAULT_PORTS.values()
    return wanted.isdigit() and int(wanted) == port


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

