"""govsync: access-governance configuration as code."""

__version__ = "0.1.0"
