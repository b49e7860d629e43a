"""Broker files: written vs fsynced, and what a power cut leaves."""

from broker.log import Record
from broker.storage import BrokerStore, PartitionStore, drop_unsynced, read_offline


def recs(*vals, start=0, epoch=0):
    return [Record(start + i, epoch, v) for i, v in enumerate(vals)]


def test_kill_keeps_written_records_power_cut_keeps_fsynced_only(tmp_path):
    s = PartitionStore(tmp_path / "t-0")
    s.append(recs(1, 2))
    s.flush()
    s.append(recs(3, start=2))
    assert s.fsynced_leo == 2
    s.close()
    assert [r.value for r in PartitionStore(tmp_path / "t-0").records] == [1, 2, 3]
    dropped = drop_unsynced(tmp_path)
    assert list(dropped) == ["t-0/log.jsonl"]
    assert [r.value for r in PartitionStore(tmp_path / "t-0").records] == [1, 2]


def test_truncate_then_append_does_not_resurrect_under_power_cut(tmp_path):
    s = PartitionStore(tmp_path / "t-0")
    s.append(recs(1, 2, 3))
    s.flush()
    s.truncate(1)
    s.append(recs(9, 9, start=1, epoch=1))
    s.close()
    drop_unsynced(tmp_path)
    assert [r.value for r in PartitionStore(tmp_path / "t-0").records] == [1]


def test_checkpoints_are_fsynced_when_written(tmp_path):
    b = BrokerStore(tmp_path)
    b.partition("t", 0).write_epochs([(0, 0), (1, 5)])
    b.write_hw_checkpoint({("t", 0): 4})
    b.close()
    drop_unsynced(tmp_path)
    b = BrokerStore(tmp_path)
    assert b.checkpointed_hw("t", 0) == 4
    assert b.partition("t", 0).epoch_entries == [(0, 0), (1, 5)]


def test_line_cut_by_a_crash_is_not_a_record(tmp_path):
    s = PartitionStore(tmp_path / "t-0")
    s.append(recs(1, 2))
    s.close()
    with open(tmp_path / "t-0" / "log.jsonl", "ab") as f:
        f.write(b'{"offset":2,"ep')
    s = PartitionStore(tmp_path / "t-0")
    assert [r.value for r in s.records] == [1, 2]
    s.append(recs(3, start=2))
    s.close()
    assert [r.value for r in PartitionStore(tmp_path / "t-0").records] == [1, 2, 3]


def test_read_offline_reports_each_replica(tmp_path):
    s = PartitionStore(tmp_path / "t-0")
    s.append(recs(5, 6))
    s.write_epochs([(0, 0)])
    s.close()
    out = read_offline(tmp_path)
    assert out["partitions"][0]["records"] == [[0, 0, 5], [1, 0, 6]]
    assert out["partitions"][0]["epoch_cache"] == [[0, 0]]
