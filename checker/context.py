"""What every anomaly detector gets: the parsed inputs, the final committed log and
the scope of records the value- and offset-keyed checks read (checker.scope)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from checker.load import Inputs
from checker.scope import Scope


@dataclass
class CheckContext:
    spark: SparkSession
    full: Inputs  # everything; the ordering checks (per consumer) read this
    scope: Scope
    # run, topic, partition, offset, value, epoch: what the cluster finally
    # committed, within the scope.
    final_log: DataFrame
    # run, topic, partition, source, broker, length, records: where each
    # partition's final log came from (all partitions).
    final_sources: DataFrame
    # run, topic, partition, offset, value: the whole final log (poll-skip).
    final_offsets: DataFrame
    _shared: dict[str, DataFrame] = field(default_factory=dict, repr=False)

    def shared(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A derived DataFrame several anomaly kinds read, built once per check."""
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
