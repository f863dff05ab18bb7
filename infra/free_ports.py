"""A block of consecutive loopback ports nothing listens on now (stdlib only).

    python3 infra/free_ports.py COUNT      # prints the first port of the block

Kafka brokers started for the tests (`.ci/run`'s broker, the tests' private brokers and
cluster) took fixed ports, and two suites side by side on one machine (two clones' CI runs)
then met on them. Ports come from below Linux's ephemeral range (32768-60999), so an
outgoing connection's local port cannot take one between the check and the broker's bind;
the search starts at a random place, so two suites starting together do not walk the same
ports. A port another process binds in between is still possible, but needs a race, not a
coincidence of defaults.
"""

from __future__ import annotations

import os
import socket
import sys

FIRST, LAST = 20_000, 32_000


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive ports on 127.0.0.1, each bound once to test it."""
    span = LAST - FIRST - count
    offset = int.from_bytes(os.urandom(2), "big") % span
    for step in range(span):
        base = FIRST + (offset + step) % span
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return base
    raise RuntimeError(f"no {count} consecutive free ports in {FIRST}-{LAST}")


if __name__ == "__main__":
    print(free_port_block(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
