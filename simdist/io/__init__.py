"""Reading the outside world: the strict scenario schema, YAML loading, overrides, catalogs, profiles."""
