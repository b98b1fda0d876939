"""Personas: bootstrap files, config and ethics on disk. Imports only memory/ and llm/ below it."""

from persona.loader import Persona, PersonaError, default_persona_dir, load_persona

__all__ = ["Persona", "PersonaError", "default_persona_dir", "load_persona"]
