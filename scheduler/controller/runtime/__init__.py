"""The operator's runtime: the one client of the API server (gateway), the informer cache,
leader election, metrics and health, API calls and their expectations, events, conditions."""
