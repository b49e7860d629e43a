"""Spark schemas of the JSON-lines files (docs/run-directory.md, format 1).

Fields whose JSON type varies by op are read as strings: Spark keeps the raw JSON
text of a number or a list in a StringType field, so ``value`` (an int for a
send, a node list for a nemesis op) and ``process`` (an int, "nemesis" or
"final") parse on every line and are cast where their meaning is known.
"""

from __future__ import annotations

from pyspark.sql import types as T

CORRUPT = "_corrupt_record"

HISTORY = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("value", T.StringType()),
        T.StructField("offset", T.LongType()),
        T.StructField("acks", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField("records", T.ArrayType(T.ArrayType(T.LongType()))),
        T.StructField("hw", T.LongType()),
        T.StructField("node", T.StringType()),
        T.StructField("epoch", T.LongType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

LOG = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("value", T.LongType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

# Events vary by type; the fields the checker and report use are typed here and
# the whole line is kept as ``raw`` for the report's event list.
EVENTS = T.StructType(
    [
        T.StructField("time", T.LongType()),
        T.StructField("node", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("leader_epoch", T.LongType()),
        T.StructField("leader", T.StringType()),
        T.StructField("isr", T.ArrayType(T.StringType())),
        T.StructField("hw", T.LongType()),
        T.StructField("leo", T.LongType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

STATES = T.StructType(
    [
        T.StructField("run", T.StringType()),
        T.StructField("broker", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("role", T.StringType()),
        T.StructField("leader", T.StringType()),
        T.StructField("leader_epoch", T.LongType()),
        T.StructField("leo", T.LongType()),
        T.StructField("hw", T.LongType()),
        T.StructField("hw_checkpoint", T.LongType()),
        T.StructField("isr", T.ArrayType(T.StringType())),
    ]
)

# Python type each JSON field must have, to explain a corrupt record precisely.
PY_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "history": {
        "index": (int,),
        "time": (int,),
        "topic": (str,),
        "partition": (int,),
        "offset": (int,),
        "records": (list,),
        "hw": (int,),
        "epoch": (int,),
    },
    "log": {
        "topic": (str,),
        "partition": (int,),
        "offset": (int,),
        "epoch": (int,),
        "value": (int,),
    },
    "events": {"time": (int,), "partition": (int,), "hw": (int,), "leo": (int,)},
}
