"""Scenario files: the format, its loader and validation, and the shipped catalogue."""
