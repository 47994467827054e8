"""Around each run: traces, depfiles and the output cache."""
