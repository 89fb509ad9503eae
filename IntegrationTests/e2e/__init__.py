"""End-to-end suite (a package so its test modules may share basenames with IntegrationTests/integration)."""
