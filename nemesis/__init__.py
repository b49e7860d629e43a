"""Faults and fault schedules."""

from nemesis.faults import FAULTS, NEMESIS, NETWORK_FAULTS, PROCESS_FAULTS, FaultWindow, Nemesis

__all__ = ["FAULTS", "NEMESIS", "NETWORK_FAULTS", "PROCESS_FAULTS", "FaultWindow", "Nemesis"]
