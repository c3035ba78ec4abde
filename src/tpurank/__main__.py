"""`python -m tpurank` is the command-line interface."""

from tpurank.cli import entry

entry()
