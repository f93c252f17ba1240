"""Smoke runs of the benchmark scripts, so they do not rot."""
