"""Flow plans: many pipelines on one network.

A *layout* gives each node at most one block range ``(a_v, b_v]``; inferences flow at a rate
``F`` from the source to the target over the states ``(v, j)`` ("at node ``v`` with ``j``
blocks done"), split over as many pipelines as the network carries. :mod:`.flow` solves the
largest flow (``T*`` of a flow plan) and the least-cost provisioning of a target flow exactly,
as one MILP (binary layout, continuous rates); :mod:`.result` is the answer
(:class:`~inferplan.codesign.pipelines.result.FlowPlan`); :mod:`.timing` is how long a node
takes for a range (FLOPs over capacity); :mod:`.helix` solves Helix's layout problem (nodes
with measured throughput tables) exactly; :mod:`.helix_baselines` runs Helix's own methods on it
(its per-node MILP, the Petals and Swarm heuristics) as comparators.
"""
