"""``python -m benchmarks.throughput``: the command line of :func:`.report.main`."""

from .report import main

main()
