"""Several DNN services on one network: the joint provisioning problem (docs/services.md).

- :mod:`~inferplan.codesign.services.joint`: the problem, its exact pricing and
  :func:`~inferplan.codesign.services.joint.provision_services`.
- :mod:`~inferplan.codesign.services.milp`: the joint MILP, exact on any network.
- :mod:`~inferplan.codesign.services.fast`: best responses with PSG and a proven lower bound.
- :mod:`~inferplan.codesign.services.file`: services files (JSON or YAML).
"""
