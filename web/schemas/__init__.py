"""Pydantic models for every request and response of the API, one module per resource."""

MAX_ID = 2**63 - 1  # the largest id a database integer holds: a bigger number in a path or query is a 422, not a 500
