"""`einc serve`, the codegen service: `app.py` (the HTTP app and its worker pool), `jobs.py`
(a request checked and compiled, in a worker) and `warm.py` (the workers' warm-up)."""
