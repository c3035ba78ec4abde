"""Network timeouts for the kaggle client: a server that accepts and never answers is a one-line error.

The kaggle client (and kagglesdk under it) sends most requests through `requests` without a
timeout, so a silent server hangs `download` or `submit` forever; its upload and download paths
also retry, which would multiply any wait. Inside `network_timeouts(what)` every HTTP request made
with `requests` gets a connect and read timeout of TPURANK_NET_TIMEOUT seconds (default 60), a
timeout is never retried, and it ends the block as a `NetworkTimeout` that names the host, even
when the client swallowed it (its upload prints the error and returns "failed").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from tpurank.core.env import NET_TIMEOUT
from tpurank.core.errors import TpurankError

TIMEOUT_ENV = NET_TIMEOUT.name
DEFAULT_TIMEOUT_S = NET_TIMEOUT.default


class NetworkTimeout(TpurankError):
    """A server that did not answer in time (not a requests error: the client's retry loops pass it on)."""

    def __init__(self, host: str, seconds: float, what: str) -> None:
        super().__init__(
            f"{what}: {host} did not answer within {seconds:g} s; check the network connection (a proxy "
            f"or firewall?) and try again later ({TIMEOUT_ENV}=SECONDS waits longer)"
        )


def timeout_seconds() -> float:
    """The connect and read timeout: TPURANK_NET_TIMEOUT, else 60 s (checked in tpurank.core.env)."""
    return NET_TIMEOUT.read()


def is_timeout(error: BaseException | None) -> bool:
    """Whether a requests / urllib3 error (or any error in its chain) is a connect or read timeout."""
    # the network client's libraries load only when a command goes online
    import requests
    from urllib3.exceptions import MaxRetryError
    from urllib3.exceptions import TimeoutError as Urllib3Timeout

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, requests.Timeout | Urllib3Timeout | TimeoutError):
            return True
        if isinstance(error, MaxRetryError) and is_timeout(error.reason):
            return True
        inner = next((a for a in getattr(error, "args", ()) if isinstance(a, BaseException)), None)
        error = inner or error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def network_timeouts(what: str) -> Iterator[None]:
    """Every `requests` call inside gets a timeout; a timeout ends the block as a NetworkTimeout.

    Args:
        what: what the block does, for the message (e.g. "download").
    """
    # the network client's libraries load only when a command goes online
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    seconds = timeout_seconds()
    send, increment = HTTPAdapter.send, Retry.increment
    caught: list[NetworkTimeout] = []
    hosts: list[str] = ["the server"]  # the last host asked, for a body read that times out later

    def timed_send(self: HTTPAdapter, request: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("timeout", None)
        if len(args) >= 2:  # (stream, timeout, ...) given by position
            args = (args[0], (seconds, seconds), *args[2:])
        else:
            kwargs["timeout"] = (seconds, seconds)
        hosts.append(urlsplit(request.url).netloc or str(request.url))
        try:
            return send(self, request, *args, **kwargs)
        except Exception as e:
            if not is_timeout(e):
                raise
            caught.append(NetworkTimeout(hosts[-1], seconds, what))
            raise caught[-1] from None

    def no_retry_on_timeout(self: Retry, *args: Any, **kwargs: Any) -> Retry:
        error = kwargs.get("error", args[3] if len(args) > 3 else None)
        if is_timeout(error):
            raise error  # type: ignore[misc]  # at once: each retry would wait the whole timeout again
        return increment(self, *args, **kwargs)

    HTTPAdapter.send, Retry.increment = timed_send, no_retry_on_timeout  # type: ignore[method-assign]
    try:
        yield
    except TpurankError:
        raise
    except Exception as e:
        if is_timeout(e):  # a body read that timed out after the answer had begun
            raise TpurankError(
                f"{what}: {hosts[-1]} stopped sending for {seconds:g} s; check the network connection and "
                f"try again (an interrupted download resumes; {TIMEOUT_ENV}=SECONDS waits longer)"
            ) from None
        raise
    finally:
        HTTPAdapter.send, Retry.increment = send, increment  # type: ignore[method-assign]
    if caught:  # the client swallowed it (its upload returns "failed" after printing the error)
        raise caught[0]
