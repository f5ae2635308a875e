"""The kernel-shaped testbed: plans carried out on one Linux machine (docs/testbed.md).

- :mod:`~inferplan.runtime.testbed.linux`: the infrastructure: network namespaces, links
  shaped by traffic control, hosts held to a share of a core by CPU quotas, and the dilation.
- :mod:`~inferplan.runtime.testbed.run`: a co-design plan carried out on it.
- :mod:`~inferplan.runtime.testbed.pair`: device-edge co-inference carried out on it.
- :mod:`~inferplan.runtime.testbed.serving`: a serving plan's decoder LM served on it.
"""
