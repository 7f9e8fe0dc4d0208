"""The state contract (contract.py), run on every backend: SQLite and PostgreSQL
(conftest.py's ``backend``)."""

from contract import *  # noqa: F403  (every test of the suite)
