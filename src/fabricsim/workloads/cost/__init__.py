"""Cost: what a fabric costs to build and run, and which fabric a job should have.

``capex`` (switches, cables, optics and cost per token) and ``fabric_plan`` (a training
job compared across fabric presets on speed and cost).
"""
