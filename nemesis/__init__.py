"""Faults and fault schedules."""

from nemesis.faults import FaultWindow, Nemesis

__all__ = ["FaultWindow", "Nemesis"]
