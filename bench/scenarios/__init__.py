"""One module per scenario; `python -m bench <module name>` runs it. See bench/scenario.py for the contract."""
