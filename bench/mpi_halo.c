#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* A strong-scaling stencil in one dimension, as an ordinary MPI program (it knows nothing
   of throttle): per iteration each rank works on its 1/p share of the domain, swaps a
   halo of H bytes with each ring neighbour and joins an allreduce of the residual.
   The work is emulated (the rank sleeps WORK/p seconds, as a node with its own cores
   would spend computing) so that ranks on one small machine do not compete for it; the
   halos and the allreduce are real. Prints `elapsed: S` (the timed iterations, after one
   warm-up) on rank 0.
   Usage: mpi_halo [HALO_BYTES=80000] [WORK_SECONDS=0.6] [ITERATIONS=3] */
static void work(double seconds) {
  struct timespec t = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&t, &t) != 0) {}
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long halo = argc > 1 ? atol(argv[1]) : 80000;
  double total = argc > 2 ? atof(argv[2]) : 0.6;
  int iterations = argc > 3 ? atoi(argv[3]) : 3;
  if (halo < 1 || halo > (1L << 28) || !(total >= 0 && total < 3600) || iterations < 1) {
    if (rank == 0) fprintf(stderr, "mpi_halo: bad arguments\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char *out_l = malloc(halo), *out_r = malloc(halo), *in_l = calloc(halo, 1), *in_r = calloc(halo, 1);
  if (!out_l || !out_r || !in_l || !in_r) {
    fprintf(stderr, "mpi_halo: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(out_l, rank, halo);
  memset(out_r, rank, halo);
  int left = (rank + size - 1) % size, right = (rank + 1) % size;
  double t0 = 0;
  for (int it = 0; it <= iterations; it++) {
    if (it == 1) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    work(total / size);
    if (size > 1) {
      MPI_Sendrecv(out_r, halo, MPI_CHAR, right, 0, in_l, halo, MPI_CHAR, left, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(out_l, halo, MPI_CHAR, left, 1, in_r, halo, MPI_CHAR, right, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
    double mine = (double)in_l[0] + in_r[halo - 1], sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  double secs = MPI_Wtime() - t0;
  if (rank == 0) printf("ranks: %d halo: %ld elapsed: %.6f\n", size, halo, secs);
  MPI_Finalize();
  return 0;
}
