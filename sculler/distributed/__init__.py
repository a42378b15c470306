"""Distributed training on Ray: parameter servers, trainers and a task-queue master.

``Cluster(...).train(...)`` and :func:`dist_train` train a v2 model across processes (or
machines) with the same arguments and events as ``trainer.SGD(...).train``;
``trainer.SGD(..., is_local=False)`` routes here. Ray is the ``dist`` extra
(``pip install sculler[dist]``) and is imported only when a cluster is made. See
docs/distributed.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from sculler.distributed.rpc import RemoteTimeout
from sculler.distributed.sharding import ShardMap, stable_shard
from sculler.distributed.tasks import TaskQueue

__all__ = ["Cluster", "dist_train", "RemoteTimeout", "ShardMap", "TaskQueue", "stable_shard",
           "train_sgd"]


def __getattr__(name: str) -> Any:
    if name == "Cluster":
        from sculler.distributed.cluster import Cluster

        return Cluster
    raise AttributeError(f"module 'sculler.distributed' has no attribute {name!r}")


def dist_train(cost: Any, parameters: Any, update_equation: Any,
               reader: Callable[[], Iterable[Any]], num_passes: int = 1,
               event_handler: Callable[[Any], None] | None = None, feeding: Any = None,
               **cluster_options: Any) -> None:
    """One call: start a :class:`Cluster` with ``cluster_options``, train, shut it down."""
    from sculler.distributed.cluster import Cluster

    with Cluster(**cluster_options) as cluster:
        cluster.train(cost, parameters, update_equation, reader, num_passes=num_passes,
                      event_handler=event_handler, feeding=feeding)


def train_sgd(sgd: Any, reader: Callable[[], Iterable[Any]], num_passes: int,
              event_handler: Callable[[Any], None] | None, feeding: Any,
              immutable_parameters: Iterable[str] | None) -> None:
    """``trainer.SGD(..., is_local=False).train``: a cluster joined at ``pserver_spec``
    (a Ray address; None or "auto": ``RAY_ADDRESS`` or a local cluster). Role counts come
    from ``SCULLER_NUM_TRAINERS`` / ``SCULLER_NUM_PSERVERS`` (default 2 each) and the mode
    from ``SCULLER_DIST_MODE`` (default sync)."""
    from sculler.distributed.cluster import Cluster

    spec = sgd.pserver_spec
    address = None if spec in (None, "auto") else str(spec)
    with Cluster(num_trainers=int(os.environ.get("SCULLER_NUM_TRAINERS", "2")),
                 num_pservers=int(os.environ.get("SCULLER_NUM_PSERVERS", "2")),
                 mode=os.environ.get("SCULLER_DIST_MODE", "sync"), address=address) as cluster:
        cluster.train(sgd.topology, sgd.parameters, sgd.optimizer, reader,
                      num_passes=num_passes, event_handler=event_handler, feeding=feeding,
                      immutable_parameters=immutable_parameters)
