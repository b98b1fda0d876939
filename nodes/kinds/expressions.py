"""Playbook templates and expressions, evaluated in Jinja2's sandbox.

`llm` prompts are templates (`Investigate: {{ task }}`); `set` assignments and Stelis labels use
expressions (`i + 1`, `findings + [stelis.chronicle]`, `plan.tasks[:max_tasks] if plan is mapping else []`).
The sandbox forbids attribute access to internals, so a playbook can compute but not reach Python.
Undefined names are errors that say which name, never silent empty strings.
"""

from __future__ import annotations

import functools
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta
from jinja2.environment import Template, TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment


class ExpressionError(ValueError):
    pass


@functools.cache
def _env() -> SandboxedEnvironment:
    return SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)


def syntax_error(source: str, kind: str = "template") -> str | None:
    """None if `source` parses as a template (or expression), else the parser's message."""
    try:
        if kind == "expression":
            _env().compile_expression(source)
        else:
            _env().parse(source)
    except TemplateSyntaxError as exc:
        return f"{exc.message} (line {exc.lineno} of the {kind})" if kind == "template" else str(exc.message)
    return None


@functools.lru_cache(maxsize=512)
def _compiled_template(source: str) -> Template:
    return _env().from_string(source)


@functools.lru_cache(maxsize=512)
def _compiled_expression(source: str) -> TemplateExpression:
    return _env().compile_expression(source, undefined_to_none=False)


@functools.lru_cache(maxsize=512)
def referenced_names(template: str) -> frozenset[str]:
    return frozenset(meta.find_undeclared_variables(_env().parse(template)))


def render(template: str, namespace: dict[str, Any]) -> str:
    try:
        return _compiled_template(template).render(namespace)
    except (UndefinedError, SecurityError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise ExpressionError(str(exc)) from exc


def evaluate(expression: str, namespace: dict[str, Any]) -> Any:
    try:
        value = _compiled_expression(expression)(**namespace)
    except (
        UndefinedError,
        SecurityError,
        TypeError,
        ValueError,
        ArithmeticError,
        LookupError,
        TemplateSyntaxError,
    ) as exc:
        raise ExpressionError(str(exc)) from exc
    if isinstance(value, StrictUndefined):
        raise ExpressionError(f"{expression!r} is undefined")
    return _plain(value)


def _plain(value: Any) -> Any:
    """Jinja returns Python objects; keep only what a checkpoint can store."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, range)):
        return [_plain(v) for v in value]
    return str(value)
