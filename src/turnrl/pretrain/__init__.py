"""Pretraining the built-in base model: the procedural corpus (:mod:`~turnrl.pretrain.corpus`,
its skills and random text), the loop (:mod:`~turnrl.pretrain.loop`), the held-out probes
(:mod:`~turnrl.pretrain.probes`) and the model card (:mod:`~turnrl.pretrain.card`).

The corpus imports nothing from :mod:`turnrl.envs`; the probes use only its tool-call parser,
to read a model's calls the way envs read them.
"""
