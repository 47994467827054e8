"""What the user sees: the console, last-build.json and report pages."""
