"""`python -m bench <scenario>`: see bench/README.md."""

from bench.cli import main

raise SystemExit(main())
