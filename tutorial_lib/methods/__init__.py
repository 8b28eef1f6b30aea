"""The methods, one chapter package per notebook family; each chapter's docstring is its reading list.

==============  ==========  ==============================================================
chapter         notebooks   what it holds
==============  ==========  ==============================================================
adaptation      02-05       feature extraction, gradual unfreezing, discriminative rates
multitask       06-07       multi-task and sequential fine-tuning, GradTS
tdt             08          regularised fine-tuning and task-guided (TDT) regularisation
prompts         09          prompt-based few-shot classifiers and DART
probing         10-12       probes, INLP and amnesic probing, adversarial heads, burn-out
forgetting      13          sequential transfer's forgetting, its regularisers, distillation
peft            14          adapters (also 03's), LoRA, (IA)³, prompt/prefix tuning, BitFit
token_tasks     15          named entities (token labels) and extractive QA (spans)
generation      16          decoding and the dialogue model
instruction     17          instruction tuning (SFT) and preference optimisation (DPO)
unlabelled      18          target-task LM fine-tuning (TAPT), consistency training, self-training
==============  ==========  ==============================================================

A chapter holds its method modules, ``settings.py`` (its notebooks' settings classes) and
``plots.py``. Chapters build on the core (``tutorial_lib/*.py``) and never on each other
(``tests/test_layering.py``); notebook 01 needs no chapter (``pretraining`` with its
``PretrainingSettings``, and ``finetuning`` are core: every chapter uses them).

Each notebook's header links its chapter's docstring (01's: ``pretraining``'s), whose "The
notebook calls" names exactly what the notebook's code cells call (``tests/test_reading_lists.py``).

Importing this package imports every chapter's settings (nothing heavier), so
:data:`NOTEBOOK_SETTINGS` holds every notebook's class.
"""

from .. import pretraining_settings as _pretraining  # noqa: F401 (registers 01's class)
from .. import settings
from .adaptation import settings as _adaptation  # noqa: F401 (registers the classes)
from .forgetting import settings as _forgetting  # noqa: F401
from .generation import settings as _generation  # noqa: F401
from .instruction import settings as _instruction  # noqa: F401
from .multitask import settings as _multitask  # noqa: F401
from .peft import settings as _peft  # noqa: F401
from .probing import settings as _probing  # noqa: F401
from .prompts import settings as _prompts  # noqa: F401
from .tdt import settings as _tdt  # noqa: F401
from .token_tasks import settings as _token_tasks  # noqa: F401
from .unlabelled import settings as _unlabelled  # noqa: F401

NOTEBOOK_SETTINGS: tuple[type[settings.Settings], ...] = settings.registered()
"""Every notebook's settings class, in notebook order (each with its ``notebook`` name)."""
