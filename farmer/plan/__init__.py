"""What would run, why, and how long it would take."""
