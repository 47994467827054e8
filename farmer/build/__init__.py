"""One build composed: the only package that knows all the others."""
