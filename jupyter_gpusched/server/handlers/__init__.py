"""REST handlers, one module per resource; the URL table is in ../routes.py."""
