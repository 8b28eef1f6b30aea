"""Chapter *unlabelled*: notebook 18, more signal from unlabelled text.

Two ways to use the task's raw text when labels are few: keep training the *language model* on it
before the classifier (ULMFiT's second stage; TAPT), or train the *classifier* to agree with itself
on perturbed unlabelled inputs (UDA's consistency loss), beside the classic self-training.

Reading list
    Howard & Ruder (2018), *Universal Language Model Fine-tuning for Text Classification*
    (ULMFiT), Sec. 3.2 (target-task LM fine-tuning) and its few-label experiments.
    Gururangan et al. (2020), *Don't Stop Pretraining* (DAPT and TAPT).
    Xie et al. (2019), *Unsupervised Data Augmentation for Consistency Training* (UDA).
    Clark et al. (2018), *Semi-Supervised Sequence Modeling with Cross-View Training*.
    Lee (2013), *Pseudo-Label*; Yarowsky (1995) for self-training's older roots.
    The NAACL-2019 tutorial's section 4.3.B ("getting more signal").

Read first
    ``settings.py`` (``UnlabelledSettings``: what 18 runs at every scale), then ``lm_stage.py``
    and ``consistency.py`` (the two methods), then ``experiments.py`` (the runs).

Modules
    ``settings.py`` — ``UnlabelledSettings``.
    ``lm_stage.py`` — the task's text as LM blocks, the LM stage through the one runner, per-line
    losses and perplexity.
    ``consistency.py`` — UDA's consistency loss, token replacement, UDA as a method's loss;
    predictions and pseudo-labels for self-training.
    ``experiments.py`` — part 1's label curve and part 2's few-label runs; their premises.
    ``plots.py`` — 18's figures and the label curve's reading.

The notebook calls
    ``lm_stage.task_texts``, ``lm_blocks``, ``lm_stage``, ``line_losses``, ``perplexity``,
    ``stage_learned``;
    ``adaptation.discriminative.stlr_schedule`` (ULMFiT's schedule, from 05);
    ``consistency.consistency_loss``, ``replace_tokens``, ``unigram_sampler``;
    ``experiments.SUPERVISED``, ``UDA_NAME``, ``SELF_TRAINING``, ``label_curve``, ``few_labels``,
    ``semi_premises``; ``references.table``; ``plots.plot_label_curve``, ``plot_perplexities``,
    ``read_label_curve``.
"""
