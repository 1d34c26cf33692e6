/* Single-core OpenBLAS dgemm throughput, the reference for bench/dgemm.sh.
   Usage: dgemm-openblas N REPEATS -> prints "openblas N GFLOP/s" (best of REPEATS). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2048, reps = argc > 2 ? atoi(argv[2]) : 3;
  double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n), *c = calloc((size_t)n * n, sizeof(double));
  for (long i = 0; i < (long)n * n; i++) { a[i] = (i % 97) / 97.0; b[i] = (i % 89) / 89.0; }
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 1.0, c, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (s < best) best = s;
  }
  printf("openblas %d %.2f\n", n, 2.0 * n * (double)n * n / best / 1e9);
  return 0;
}
