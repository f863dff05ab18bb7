"""Whether an IP address is public, judged with every IPv4 address it carries.

An IPv6 address can carry an IPv4 one, and a packet to it may end up there: IPv4-mapped
(``::ffff:127.0.0.1``), IPv4-compatible (``::127.0.0.1``, deprecated but still parsed and,
by :mod:`ipaddress`, called global), 6to4 (``2002:7f00:1::``), Teredo (server and client)
and the NAT64 well-known prefix (``64:ff9b::127.0.0.1``, translated by a gateway of the
server's own network). An address is public only when it and every address it carries are
globally routable unicast addresses (:attr:`ipaddress.IPv4Address.is_global`, and not multicast): loopback,
private, link-local (the cloud metadata service), shared, reserved, multicast and unspecified
are all not.
"""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def carried_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 ``address`` carries (none for an IPv4 address or a plain IPv6 one)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    carried: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        carried.append(address.ipv4_mapped)
    if address in _COMPATIBLE or address in _NAT64:
        carried.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        carried.append(address.sixtofour)
    if address.teredo is not None:
        carried.extend(address.teredo)
    return carried


def _unicast_global(address: Address) -> bool:
    """Globally routable and one host (:attr:`is_global` lets some multicast ranges through)."""
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_unspecified
                                      or address.is_loopback or address.is_link_local)


def is_public(address: Address) -> bool:
    """``address`` and every IPv4 address it carries are globally routable unicast addresses.

    A mapped, compatible or NAT64 address is only a spelling of the IPv4 one it carries (their
    prefixes are not global themselves), so it is judged by that address alone."""
    carried = carried_ipv4(address)
    if isinstance(address, ipaddress.IPv6Address) and (
            address.ipv4_mapped is not None or address in _COMPATIBLE or address in _NAT64):
        return bool(carried) and all(_unicast_global(inner) for inner in carried)
    return _unicast_global(address) and all(_unicast_global(inner) for inner in carried)
