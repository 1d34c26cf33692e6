#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* An exchange in the manner of the Intel MPI Benchmarks' Exchange (IMB-MPI1), as an
   ordinary MPI program that knows nothing of throttle: every iteration each rank posts
   nonblocking receives from both ring neighbours, sends M bytes to each at once
   (MPI_Isend, both directions in flight together) and waits for all four, then works for
   WORK seconds of its own (weak scaling: the work per rank does not shrink with p) and
   joins an allreduce of an 8-kB vector (a convergence check). The work is emulated
   (a sleep, as a node with its own cores would spend computing); every byte is real.
   Per node the ring carries 2M bytes out and in per iteration whatever p is, so the
   bandwidth it needs grows only through the allreduce: a program whose demand is nearly
   flat in p. Prints `elapsed: S` (the timed iterations, after one warm-up) on rank 0.
   Usage: mpi_exchange [MSG_BYTES=60000] [WORK_SECONDS=0.1] [ITERATIONS=4] */
static void work(double seconds) {
  struct timespec t = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&t, &t) != 0) {}
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long msg = argc > 1 ? atol(argv[1]) : 60000;
  double each = argc > 2 ? atof(argv[2]) : 0.1;
  int iterations = argc > 3 ? atoi(argv[3]) : 4;
  if (msg < 1 || msg > (1L << 28) || !(each >= 0 && each < 3600) || iterations < 1) {
    if (rank == 0) fprintf(stderr, "mpi_exchange: bad arguments\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  enum { VEC = 1024 };
  char *out = malloc(2 * msg), *in = calloc(2 * msg, 1);
  double *vec = calloc(VEC, sizeof(double)), *sum = calloc(VEC, sizeof(double));
  if (!out || !in || !vec || !sum) {
    fprintf(stderr, "mpi_exchange: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(out, rank, 2 * msg);
  int left = (rank + size - 1) % size, right = (rank + 1) % size;
  double t0 = 0;
  for (int it = 0; it <= iterations; it++) {
    if (it == 1) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    if (size > 1) {
      MPI_Request r[4];
      MPI_Irecv(in, msg, MPI_CHAR, left, 0, MPI_COMM_WORLD, &r[0]);
      MPI_Irecv(in + msg, msg, MPI_CHAR, right, 1, MPI_COMM_WORLD, &r[1]);
      MPI_Isend(out, msg, MPI_CHAR, right, 0, MPI_COMM_WORLD, &r[2]);
      MPI_Isend(out + msg, msg, MPI_CHAR, left, 1, MPI_COMM_WORLD, &r[3]);
      MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    }
    work(each);
    vec[0] = (double)in[0] + in[2 * msg - 1];
    MPI_Allreduce(vec, sum, VEC, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  double secs = MPI_Wtime() - t0;
  if (rank == 0) printf("ranks: %d msg: %ld elapsed: %.6f\n", size, msg, secs);
  MPI_Finalize();
  return 0;
}
