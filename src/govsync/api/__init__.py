"""The control API: models, operation catalog, table of kinds, client."""
