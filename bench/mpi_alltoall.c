#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* A transpose, as in a distributed FFT, as an ordinary MPI program that knows nothing of
   throttle: a fixed data set of D bytes is spread over the ranks; every iteration each
   rank works on its 1/p share (WORK/p seconds, strong scaling) and then MPI_Alltoall
   sends each other rank D/p^2 bytes of it. Per node (p - 1) D / p^2 bytes leave and
   arrive per iteration: the traffic per node falls about as 1/p, like the work, so the
   bandwidth it needs levels off as p grows. The work is emulated (a sleep, as a node with
   its own cores would spend computing); every byte is real. Prints `elapsed: S` (the
   timed iterations, after one warm-up) on rank 0.
   Usage: mpi_alltoall [DATA_BYTES=1200000] [WORK_SECONDS=0.8] [ITERATIONS=3] */
static void work(double seconds) {
  struct timespec t = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&t, &t) != 0) {}
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long data = argc > 1 ? atol(argv[1]) : 1200000;
  double total = argc > 2 ? atof(argv[2]) : 0.8;
  int iterations = argc > 3 ? atoi(argv[3]) : 3;
  if (data < 1 || data > (1L << 30) || !(total >= 0 && total < 3600) || iterations < 1) {
    if (rank == 0) fprintf(stderr, "mpi_alltoall: bad arguments\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = data / ((long)size * size);
  if (block < 1) block = 1;
  char *out = malloc(block * size), *in = calloc(block * size, 1);
  if (!out || !in) {
    fprintf(stderr, "mpi_alltoall: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(out, rank, block * size);
  double t0 = 0;
  for (int it = 0; it <= iterations; it++) {
    if (it == 1) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    work(total / size);
    MPI_Alltoall(out, (int)block, MPI_CHAR, in, (int)block, MPI_CHAR, MPI_COMM_WORLD);
    out[0] = in[block * size - 1];
  }
  double secs = MPI_Wtime() - t0;
  if (rank == 0) printf("ranks: %d block: %ld elapsed: %.6f\n", size, block, secs);
  MPI_Finalize();
  return 0;
}
