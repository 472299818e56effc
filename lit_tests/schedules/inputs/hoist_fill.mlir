transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %q = transform.einc.match stmt "output0" axis "F.q" in %root
  %qo, %qi = transform.einc.tile %q by 2
  %n = transform.einc.match stmt "output0" axis "N" in %root
  %h = transform.einc.match stmt "output0" axis "HO" in %root
  %w = transform.einc.match stmt "output0" axis "WO" in %root
  %c = transform.einc.match stmt "output0" axis "C" in %root
  %kh = transform.einc.match stmt "output0" axis "KH" in %root
  %kw = transform.einc.match stmt "output0" axis "KW" in %root
  %r = transform.einc.match stmt "output0" axis "F.r" in %root
  %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8 = transform.einc.reorder %n, %qo, %h, %w, %c, %kh, %kw, %qi, %r
  %o, %l = transform.einc.group_lanes %r7 by 2 interleaved
  %x = transform.einc.cache_read "input0" at %r1 split 1 by 3 layout [0, 2, 3, 4, 1] halo
  %p = transform.einc.prefetch "input0" at %r1 by 1 spread %r2
  transform.einc.hoist_fill %x
  transform.yield
}
