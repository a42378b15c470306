"""Which parameter server holds what: dense parameters whole, sparse tables by row.

The answer must be the same in every process, so it uses ``zlib.crc32`` of the name (Python's
``hash`` of a string is salted per process). A dense parameter lives whole on shard
``crc32(name) % n``; row ``r`` of a sparse-update table (``attr.Param(sparse_update=True)``)
lives on shard ``r % n`` at local row ``r // n``, so a batch's rows spread evenly.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np

from sculler.core.model_config import ParameterConfig


def stable_shard(name: str, num_shards: int) -> int:
    """``crc32(utf-8 name) % num_shards``: the same in every process and run."""
    return zlib.crc32(name.encode("utf-8")) % num_shards


class ShardMap:
    """Placement of a model's trainable parameters on ``num_shards`` servers.

    Args:
        configs: the parameters' configs; ``sparse_update`` ones (2-D) are split by rows.
        num_shards: number of parameter servers (>= 1).
    """

    def __init__(self, configs: Iterable[ParameterConfig], num_shards: int) -> None:
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError(f"num_shards must be an int >= 1, got {num_shards!r}")
        self.num_shards = num_shards
        self.configs = {c.name: c for c in configs}
        self.sparse = [n for n, c in self.configs.items() if c.sparse_update and not c.is_static]
        for name in self.sparse:
            if len(self.configs[name].dims) != 2:
                raise ValueError(f"sparse_update parameter {name!r} must be 2-D to be split by "
                                 f"rows, got dims {self.configs[name].dims}")
        self.dense = [n for n in self.configs if n not in self.sparse]
        self.dense_owner = {n: stable_shard(n, num_shards) for n in self.dense}

    def dense_on(self, shard: int) -> list[str]:
        """Names of the dense parameters shard ``shard`` holds whole."""
        return [n for n in self.dense if self.dense_owner[n] == shard]

    def rows_on(self, name: str, shard: int) -> int:
        """How many rows of sparse table ``name`` shard ``shard`` holds."""
        total = int(self.configs[name].dims[0])
        return max(0, (total - shard + self.num_shards - 1) // self.num_shards)

    def global_rows(self, shard: int, count: int) -> np.ndarray:
        """Global ids of local rows ``0 .. count-1`` of ``shard``."""
        return np.arange(count, dtype=np.int64) * self.num_shards + shard

    def split_rows(self, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Group global row ids by owner: per shard ``(positions in rows, local row ids)``."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        owner = rows % self.num_shards
        out = []
        for s in range(self.num_shards):
            pos = np.flatnonzero(owner == s)
            out.append((pos, rows[pos] // self.num_shards))
        return out

    def slice_table(self, name: str, table: np.ndarray, shard: int) -> np.ndarray:
        """The rows of a whole table that ``shard`` holds, as a contiguous copy."""
        return np.ascontiguousarray(table[shard::self.num_shards])

    def assemble_table(self, name: str, parts: list[np.ndarray], out: np.ndarray) -> None:
        """Write every shard's rows of table ``name`` back into the whole table ``out``."""
        for shard, part in enumerate(parts):
            out[shard::self.num_shards] = part
