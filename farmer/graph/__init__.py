"""A `Spec` into the graph of computations, and its cache."""
