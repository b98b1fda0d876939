"""Many personas, many workers, one PostgreSQL database and one Chroma server: the registry (personas.py), the job
engine (jobs.py: procrastinate), what a worker does with each job (runtime.py) and the worker process (worker.py)."""
