"""The default C of one cpu_operators operator: dump.py KEY BATCH OUT.c (from the worktree root)."""
import sys; sys.path.insert(0,'benchmarks')
import cpu_operators as c, einc
key, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
window = int(__import__("os").environ.get("WINDOW", 3))  # WINDOW=5 with conv2d_grouped: its 5x5 filter, pad 2
op = c.ops(n)[key] if window == 3 else c.Conv(256, 256, (28, 28), (window, window), pad=window // 2, groups=32).op(key, n)
k = einc.compile(op.ir, op.inputs, target='c', use_records=False)
open(out,'w').write(k.source)
print(str(k.schedule) if hasattr(k,'schedule') else '')
