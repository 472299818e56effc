// Per-thread CPU time of two C variants of the 7x7 stem (`conv2d_7x7` at batch 1, 1x3x224x224
// -> 64, 7x7 stride 2 pad 3) at 2 threads: which thread does how much of a call's work, a
// figure a shared machine's load leaves alone (wall clock does not). With
// OMP_WAIT_POLICY=passive a waiting thread sleeps, so its CPU time is its work; the larger
// of the two is the call's critical path when each thread has a core. Checked old == new.
//
//   PYTHONPATH=. .venv/bin/python benchmarks/ab_operator_c.py --dump conv2d_7x7 1 new.c   (and old.c on the old tree)
//   sed 's/void kernel(/void kernel_old(/; s/einc_parallel_/old_parallel_/g' old.c > o.c
//   sed 's/void kernel(/void kernel_new(/; s/einc_parallel_/new_parallel_/g' new.c > n.c
//   gcc -O3 -march=native -mprefer-vector-width=512 -fopenmp -fwrapv -fno-math-errno \
//       -ffp-contract=fast -fno-loop-unroll-and-jam benchmarks/stem_thread_cpu.c o.c n.c -o stem
//   OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 ./stem
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void kernel_old(const float*, const float*, float*);
void kernel_new(const float*, const float*, float*);
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void run(void (*k)(const float*, const float*, float*), const float* a, const float* b, float* c, int reps, double* out) {
  double t0[2], t1[2];
  #pragma omp parallel num_threads(2)
  t0[omp_get_thread_num()] = cpu();
  double w = omp_get_wtime();
  for (int i = 0; i < reps; i++) k(a, b, c);
  w = omp_get_wtime() - w;
  #pragma omp parallel num_threads(2)
  t1[omp_get_thread_num()] = cpu();
  out[0] = (t1[0] - t0[0]) / reps * 1e3; out[1] = (t1[1] - t0[1]) / reps * 1e3; out[2] = w / reps * 1e3;
}
int main(void) {
  float* a = aligned_alloc(64, 3 * 224 * 224 * 4); float* b = aligned_alloc(64, 64 * 147 * 4);
  float* c = aligned_alloc(64, 64 * 112 * 112 * 4); float* d = aligned_alloc(64, 64 * 112 * 112 * 4);
  srand(0);
  for (int i = 0; i < 3 * 224 * 224; i++) a[i] = rand() / (float)RAND_MAX - 0.5f;
  for (int i = 0; i < 64 * 147; i++) b[i] = rand() / (float)RAND_MAX - 0.5f;
  kernel_old(a, b, c); kernel_new(a, b, d);
  double err = 0; for (int i = 0; i < 64 * 112 * 112; i++) { double e = c[i] - d[i]; if (e < 0) e = -e; if (e > err) err = e; }
  printf("max |old - new| %.2e\n", err);
  double o[3], n[3], best[2][3] = {{1e9, 1e9, 1e9}, {1e9, 1e9, 1e9}};
  for (int r = 0; r < 15; r++) {
    run(kernel_old, a, b, c, 20, o); run(kernel_new, a, b, d, 20, n);
    for (int j = 0; j < 3; j++) { if (o[j] < best[0][j]) best[0][j] = o[j]; if (n[j] < best[1][j]) best[1][j] = n[j]; }
    printf("round %2d  old: master %.3f worker %.3f wall %.3f ms | new: master %.3f worker %.3f wall %.3f ms\n", r, o[0], o[1], o[2], n[0], n[1], n[2]);
  }
  printf("minima    old: master %.3f worker %.3f wall %.3f ms | new: master %.3f worker %.3f wall %.3f ms\n",
         best[0][0], best[0][1], best[0][2], best[1][0], best[1][1], best[1][2]);
  return 0;
}
