"""Benchmarks: ``python -m bench NAME`` prints figures and ratios against peers run alongside."""
