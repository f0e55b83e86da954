"""Helpers shared by the tests: trace builders, the shared data paths, warehouse and browser helpers."""
