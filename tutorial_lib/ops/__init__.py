"""Operations: what runs, ships and reports the notebooks, off the student's path.

No notebook imports these, and neither the core (``tutorial_lib/*.py``) nor the methods import
them (``tests/test_layering.py``):

* :mod:`~tutorial_lib.ops.prefetch`: every dataset and model a scale needs, fetched or verified
  (``python -m tutorial_lib.ops.prefetch --scale gpu``);
* :mod:`~tutorial_lib.ops.bundle`: the offline bundle for a node without internet
  (``prefetch --bundle``; ``scripts/install_bundle.sh``);
* :mod:`~tutorial_lib.ops.report`: the main job's ``RESULTS.md`` (where its figures lie), failures,
  effects, Holm's correction, replication and peak-memory tables (``scripts/run_notebooks.py``);
* :mod:`~tutorial_lib.ops.seed_plan`: the gpu scale's seeds from the power analysis, and docs/gpu.md's
  table of them (``python -m tutorial_lib.ops.seed_plan --write docs/gpu.md``);
* :mod:`~tutorial_lib.ops.fingerprints`: the local copy's content fingerprints, compared with the
  committed ones or written (``python -m tutorial_lib.ops.fingerprints --write``).

The device kit for a borrowed GPU machine is ``scripts/device_kit.py`` (docs/gpu.md).
"""
