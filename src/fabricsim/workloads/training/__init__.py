"""Training: a step of a parallel training job, its memory, layouts, scaling and goodput.

``parallel`` (how a job is split), ``compute`` (one micro-batch on one GPU), ``memory``,
``step`` (one step's time and where it goes), ``megatron`` (Megatron-LM/NeMo argument
lists), ``planner`` (the best layout), ``scaling`` (a job over GPU counts) and ``goodput``
(failures, checkpoints and restarts).
"""
