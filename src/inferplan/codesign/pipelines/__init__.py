"""Flow plans: many pipelines on one network, each node holding one contiguous layer range."""
