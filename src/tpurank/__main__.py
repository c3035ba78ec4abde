"""`python -m tpurank` is the command-line interface."""

from tpurank.cli import main

raise SystemExit(main())
