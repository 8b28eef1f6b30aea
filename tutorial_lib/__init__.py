"""tutorial_lib: the support package of the "Transfer Learning in NLP" notebooks.

One module per concept: ``config`` (the scale knob and paths), ``data``, ``tokenization``,
``models``, ``training``, ``pretraining``, ``finetuning``, ``plots`` and one module per method.
Modules are imported on use so that ``import tutorial_lib`` stays cheap.
"""

__version__ = "0.1.0"

# The one place the repository's address lives: scripts/sync_notebooks.py writes it into every
# notebook's Colab badge and install cell, and tests/test_notebooks.py checks they agree.
REPO_SLUG = "transfer-learning-notebooks/transfer-learning-nlp"
REPO_URL = f"https://github.com/{REPO_SLUG}"
# The branch Colab opens the notebooks from (badges) and installs tutorial_lib from (the first
# cell), so that a notebook and the library it calls come from the same line of commits. A branch
# that keeps existing; a release tag works the same way (e.g. "v0.2") once one is pushed.
COLAB_REF = "main"
