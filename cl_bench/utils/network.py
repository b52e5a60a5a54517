"""One quick answer to "can this machine reach that host?", before anything waits on the network.

Used before a hub model loads (:func:`cl_bench.models.hub.check_model_reachable`) and before
the main job fetches missing data (:func:`cl_bench.data.download.ensure_data`): without it an
unreachable host costs the HTTP clients' retries (tens of seconds) before any message.
"""

from __future__ import annotations

import socket
import threading
import urllib.parse
import urllib.request

#: Seconds the probe waits for DNS and a TCP connection together.
PROBE_TIMEOUT = 3.0


def host_reachable(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when a TCP connection to ``url``'s host (or the proxy configured for its scheme) opens in time.

    Name resolution is included in ``timeout``: it runs in a daemon thread, since a hanging
    resolver ignores socket timeouts.

    Args:
        url: an ``http(s)://host[:port]/...`` URL.
        timeout: seconds for DNS and the connection together.
    """
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    host = parts.hostname
    if not host:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    outcome: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=probe, daemon=True, name="cl-bench-reachability")
    thread.start()
    thread.join(timeout)
    return bool(outcome and outcome[0])
