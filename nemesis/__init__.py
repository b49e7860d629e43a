"""Faults and fault schedules, on any cluster that satisfies `Cluster`."""

from nemesis.cluster import Cluster
from nemesis.faults import FaultWindow, Nemesis

__all__ = ["Cluster", "FaultWindow", "Nemesis"]
