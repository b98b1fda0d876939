"""Personas: bootstrap files, config and ethics on disk. Imports only memory/ and llm/ below it."""

from persona.loader import Persona, PersonaError, default_persona_dir, load_persona, refresh_persona
from persona.skills import Skill, skills_block

__all__ = ["Persona", "PersonaError", "Skill", "default_persona_dir", "load_persona", "refresh_persona", "skills_block"]
