"""Executing plans on real PyTorch models (needs the ``torch`` extra).

Nothing in the planners imports this package, and importing it loads no torch: import the
module you need (``inferplan.runtime.split``, ``inferplan.runtime.pipeline``, ...).
"""
