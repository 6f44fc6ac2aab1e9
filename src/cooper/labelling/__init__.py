"""labelling."""
