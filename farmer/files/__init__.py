"""File primitives every layer may use: digests, atomic writes, private folders, the lock."""
