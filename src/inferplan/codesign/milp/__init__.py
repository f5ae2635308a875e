"""The co-design problem as mixed-integer linear programs (HiGHS), exact on any directed network.

- :mod:`~inferplan.codesign.milp.cost`: the cheapest plan at an interval, and the state flow
  (:class:`~inferplan.codesign.milp.cost.StateFlow`) and model the other MILPs build on.
- :mod:`~inferplan.codesign.milp.latency`: the cheapest plan under a latency bound.
- :mod:`~inferplan.codesign.milp.throughput`: T*, the least interval, cycles included.
"""
