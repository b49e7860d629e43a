"""What every anomaly detector gets: the parsed inputs plus the final committed log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from checker.load import Inputs


@dataclass
class CheckContext:
    spark: SparkSession
    inputs: Inputs
    # run, topic, partition, offset, value, epoch: what the cluster finally committed.
    final_log: DataFrame
    # run, topic, partition, source, broker, length: where final_log came from.
    final_sources: DataFrame
    _shared: dict[str, DataFrame] = field(default_factory=dict, repr=False)

    def shared(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A derived DataFrame several anomaly kinds read (acked sends, consumer
        records), built and cached once per check instead of once per kind."""
        if name not in self._shared:
            self._shared[name] = build().cache()
        return self._shared[name]

    @property
    def history(self) -> DataFrame:
        return self.inputs.history

    @property
    def logs(self) -> DataFrame:
        return self.inputs.logs

    @property
    def states(self) -> DataFrame:
        return self.inputs.states
