#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Ping-pong between rank 0 and the last rank, for each message size on the command line
   (bytes), like IMB-MPI1 PingPong but reporting the median round trip rather than the
   mean: sizes up to the last argument, each repeated until at least MIN_SECONDS (env
   PP_SECONDS, default 0.3) and 5 round trips have passed, after 2 untimed ones. Rank 0
   prints one line per size: "size=S count=N median_us=X p10_us=Y p90_us=Z". */
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int last = size - 1;
  double min_secs = getenv("PP_SECONDS") ? atof(getenv("PP_SECONDS")) : 0.3;
  long biggest = 1;
  for (int a = 1; a < argc; a++) if (atol(argv[a]) > biggest) biggest = atol(argv[a]);
  char *buf = malloc(biggest);
  memset(buf, 1, biggest);
  double *t = malloc(sizeof(double) * 100000);
  for (int a = 1; a < argc && last > 0; a++) {
    long n = atol(argv[a]);
    if (n <= 0) continue;
    int count = 0, go = 1;
    double start = MPI_Wtime();
    for (int i = 0; go; i++) {
      double t0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(buf, n, MPI_CHAR, last, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, n, MPI_CHAR, last, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i >= 2) t[count++] = MPI_Wtime() - t0;
        go = count < 100000 && (count < 5 || MPI_Wtime() - start < min_secs);
      } else if (rank == last) {
        MPI_Recv(buf, n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
      }
      /* Rank 0 decides when a size is done and tells the other side. */
      if (rank == 0 || rank == last) {
        if (rank == 0) MPI_Send(&go, 1, MPI_INT, last, 1, MPI_COMM_WORLD);
        else MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else go = 0;
    }
    if (rank == 0) {
      qsort(t, count, sizeof(double), cmp);
      printf("size=%ld count=%d median_us=%.1f p10_us=%.1f p90_us=%.1f\n", n, count,
             t[count / 2] * 1e6, t[count / 10] * 1e6, t[(count * 9) / 10] * 1e6);
      fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
