"""The default C of one cpu_operators operator: dump.py KEY BATCH OUT.c (from the worktree root)."""
import sys; sys.path.insert(0,'benchmarks')
import cpu_operators as c, einc
key, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
op = c.ops(n)[key]
k = einc.compile(op.ir, op.inputs, target='c', use_records=False)
open(out,'w').write(k.source)
print(str(k.schedule) if hasattr(k,'schedule') else '')
