"""Storage: SQLAlchemy models, repositories and the database handle. Imports nothing above it."""

from memory.db import SCHEMA_VERSION, Database, DatabaseOpenError, SchemaError
from memory.repositories import Repos

__all__ = ["SCHEMA_VERSION", "Database", "DatabaseOpenError", "Repos", "SchemaError"]
