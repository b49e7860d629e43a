"""The checker's Spark session: shuffle partitions follow the local cores (four on
local[2], as before), and a cluster's master keeps Spark's own."""

from __future__ import annotations

import os

import pytest

from checker.spark import get_session, local_parallelism


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("local[2]", 4),
        ("local", 2),
        ("local[3,2]", 6),  # three cores, two task retries
        ("local[*]", 2 * (os.cpu_count() or 1)),
        ("spark://host:7077", None),
        ("yarn", None),
        ("local-cluster[2,1,1024]", None),  # executors in their own JVMs: a cluster
    ],
)
def test_local_parallelism(master: str, expected: int | None) -> None:
    assert local_parallelism(master) == expected


@pytest.mark.spark
def test_default_session_keeps_four_shuffle_partitions() -> None:
    spark = get_session()
    if spark.sparkContext.master != "local[2]":
        pytest.skip(f"session runs on {spark.sparkContext.master}")
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.sparkContext.defaultParallelism == 4
