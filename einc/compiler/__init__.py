"""The compiler: `driver.py` (the stage table behind `einc.compile`), `kernel.py` (the compiled
kernel and its call path), `registry.py` (einc's passes, plugin passes, and running pipelines)
and `records.py` (the tuning records a compile reads)."""
