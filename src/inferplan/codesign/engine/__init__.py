"""The state-graph engines: the exact single-service solvers and the loops they run on.

- :mod:`~inferplan.codesign.engine.psg`: PSG (the paper's Algorithm 1, and its numpy engine),
  the cheapest plan at an interval on an acyclic network.
- :mod:`~inferplan.codesign.engine.throughput`: T*, the least interval of any deployment.
- :mod:`~inferplan.codesign.engine.lattice`: the lattice engine for T* on branched graphs.
- :mod:`~inferplan.codesign.engine.subsets`: PSG's compute step on branched graphs without
  tables of pairs (the comparable pairs only), whose loop is
  :mod:`~inferplan.codesign.engine.subset_kernel` (numba).
- :mod:`~inferplan.codesign.engine.compiled`: the compiled engine behind PSG and T*, whose
  loops are :mod:`~inferplan.codesign.engine.kernels` (numba) and whose machine code
  :mod:`~inferplan.codesign.engine.native` keeps on disk.

The price tables they read are the instance's (:mod:`~inferplan.codesign.instance`).
"""
