"""The face: one FastAPI app serving the server-rendered pages (Jinja2 + htmx, live parts over Server-Sent Events)
and the JSON API under /api. Pages and API are thin routers over one service layer (web/services/); the loop is
never in a request's path: the web writes notes, control flags and approvals to the database and streams what
the loop records (graph/loop/journal.py)."""
