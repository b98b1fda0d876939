"""Pydantic models for every request and response of the API, one module per resource."""
