"""What every anomaly detector gets: the parsed inputs plus the final committed log."""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def history(self) -> DataFrame:
        return self.inputs.history

    @property
    def logs(self) -> DataFrame:
        return self.inputs.logs

    @property
    def states(self) -> DataFrame:
        return self.inputs.states
