"""Plans under a latency bound, and the deployment of least latency.

- :mod:`~inferplan.codesign.latency.bound`: PSG under a latency bound (Lagrangian), the
  least latency of a deployment, the throughput within a latency bound and the exact trade of
  one stage. The MILP under a bound is :mod:`~inferplan.codesign.milp.latency`.
"""
