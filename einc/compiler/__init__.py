"""The compiler: `driver.py` (the stage table behind `einc.compile`), `kernel.py` (the compiled
kernel and its call path), `records.py` (the tuning records a compile reads) and
`plugins.py` (pass plugins)."""
