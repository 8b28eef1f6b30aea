"""Performance benchmarks of ``tutorial_lib`` (see ``benchmarks/README.md``)."""
