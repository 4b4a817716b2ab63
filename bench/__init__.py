"""Load benchmarks of Tenet against a framework-free baseline (`python -m bench <scenario>`).

Not part of the test run: nothing here asserts on timings, it only measures and reports. See README.md.
"""
