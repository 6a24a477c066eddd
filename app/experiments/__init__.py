"""A/B experiments: bucketing, the experiments section, the sample-ratio check."""
