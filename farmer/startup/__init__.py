"""What keeps start-up cheap, in one place (docs/performance.md, start-up rules)."""
