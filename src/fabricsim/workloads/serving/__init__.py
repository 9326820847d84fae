"""Serving: prefill, decode, batching and disaggregation of one model instance.

``config`` (how a model is served), ``instance`` (a validated instance and its kernel
times), ``static`` (a static batch), ``batching`` (continuous batching, request traces),
``disaggregated`` (prefill and decode apart) and ``run`` (what a configuration asks for).
"""
