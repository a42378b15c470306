"""Remote calls with a deadline: every call to an actor goes through :func:`call_all`.

A call to an actor that is restarting (``ActorUnavailableError``) is sent again until the
deadline; pushes carry sequence numbers, so a resent push applies once. At the deadline the
call raises :class:`RemoteTimeout` naming the role and method (a timed-out ``ray.get`` does not
cancel the call; the sequence numbers make that harmless). A dead actor that Ray will not
restart is retried the same way and ends as :class:`RemoteTimeout` at the deadline (trainers,
which are not restarted, are watched by the driver instead).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any


class RemoteTimeout(TimeoutError):
    """A remote call did not answer within its deadline."""

    def __init__(self, role: str, method: str, waited_s: float) -> None:
        super().__init__(f"{role}.{method} did not answer within {waited_s:.1f} s (is the "
                         "actor alive and the cluster not overloaded? raise rpc_timeout_s)")
        self.role, self.method, self.waited_s = role, method, waited_s


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("sculler.distributed needs Ray; install it with "
                          "`pip install sculler[dist]`") from exc
    return ray


def call_all(calls: Sequence[tuple[str, Any, tuple]], timeout_s: float) -> list[Any]:
    """Run ``(role, actor_method, args)`` calls concurrently; their results, in order.

    Every call is submitted first, then awaited against one shared deadline.
    """
    ray = import_ray()
    from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError

    deadline = time.monotonic() + timeout_s
    refs = [method.remote(*args) for _, method, args in calls]
    results = []
    for (role, method, args), ref in zip(calls, refs):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemoteTimeout(role, _name(method), timeout_s)
            try:
                results.append(ray.get(ref, timeout=left))
                break
            except GetTimeoutError:
                raise RemoteTimeout(role, _name(method), timeout_s) from None
            except (ActorUnavailableError, ActorDiedError) as exc:
                # restarting (a restartable actor may also report itself dead meanwhile);
                # one that stays dead ends as RemoteTimeout at the deadline
                if deadline - time.monotonic() <= 0.1:
                    raise RemoteTimeout(role, _name(method), timeout_s) from exc
                time.sleep(0.1)
                ref = method.remote(*args)
    return results


def call(role: str, method: Any, *args: Any, timeout_s: float) -> Any:
    """One remote call with a deadline (see :func:`call_all`)."""
    return call_all([(role, method, args)], timeout_s)[0]


def _name(method: Any) -> str:
    return getattr(method, "_method_name", None) or getattr(method, "__name__", "call")
