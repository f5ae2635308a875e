"""Plans under a latency bound, and the deployment of least latency.

- :mod:`~inferplan.codesign.latency.trade`: the exact trade of one stage between cost and
  delay (its best response at a multiplier) and the exact allocation of a fixed deployment
  under a latency bound;
- :mod:`~inferplan.codesign.latency.bound`: PSG under a latency bound (Lagrangian relaxation,
  ranked state paths) and PFP's frozen deployment under one;
- :mod:`~inferplan.codesign.latency.least`: the least latency of a deployment, T* within a
  latency bound, the check of a bound and the error when no plan meets one.

The MILP under a bound is :mod:`~inferplan.codesign.milp.latency`.
"""
