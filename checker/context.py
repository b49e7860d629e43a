"""What every anomaly detector gets: the parsed inputs, the history's few rows
(checker.sparse), the final committed log and the scope of records the value-
and offset-keyed checks read (checker.scope); and, earlier, what the kinds'
declarations of their needs (checker.anomalies.base.Needs) are computed from."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from checker.finallog import FinalLog
from checker.load import Inputs
from checker.scope import Scope
from checker.sends import SendOps


@dataclass
class Known:
    """What the checker knows before it narrows the inputs (checker.scope): small
    or kept frames, read by the kinds' Needs to name the rows they need."""

    spark: SparkSession
    sparse: DataFrame  # checker.sparse
    sends: SendOps  # checker.sends
    steps: DataFrame  # CheckContext.steps
    final: FinalLog  # where each partition's final log came from, and its length


@dataclass
class CheckContext:
    spark: SparkSession
    full: Inputs  # everything
    scope: Scope
    # Poll lines (ok polls summarised), nemesis ops, unsuccessful sends: checker.sparse.
    sparse: DataFrame
    # Consumer reads that do not follow the one before by exactly one offset
    # (checker.anomalies.observations.consumer_steps).
    steps: DataFrame
    # run, topic, partition, offset, value, epoch: what the cluster finally
    # committed, within the scope.
    final_log: DataFrame
    # run, topic, partition, source, broker, length, records: where each
    # partition's final log came from (all partitions).
    final_sources: DataFrame
    _shared: dict[str, DataFrame] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def shared(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A derived DataFrame several anomaly kinds read, built once per check
        (the kinds may be planned from several threads: checker.api)."""
        with self._lock:
            if name not in self._shared:
                self._shared[name] = build()
            return self._shared[name]

    @property
    def sends(self) -> DataFrame:
        """Send ops (invokes and completions) in scope."""
        return self.scope.sends

    @property
    def reads(self) -> DataFrame:
        return self.scope.reads

    @property
    def logs(self) -> DataFrame:
        """Replica log records in scope."""
        return self.scope.logs

    @property
    def states(self) -> DataFrame:
        return self.full.states
