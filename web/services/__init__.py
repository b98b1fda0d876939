"""The service layer: what the pages and the API do, as plain functions over a unit of work (`Repos`) and the web's
services. Routers only translate HTTP; templates only render what these return."""
