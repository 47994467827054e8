"""Tests of farmer.remote against a real REAPI server (a package, so its conftest is not `conftest`)."""
