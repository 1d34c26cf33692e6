#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Ping-pong (rank 0 <-> last rank), a large-message bandwidth loop (rank 0 -> last rank,
   each chunk checked), and an allreduce over every rank. */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long bytes = argc > 1 ? atol(argv[1]) : 16L << 20;
  int chunk = 1 << 20, last = size - 1, bad = 0;
  char *buf = malloc(chunk);
  /* One untimed round trip first: Open MPI opens its connections on first use, and the
     round-trip time is meant without that set-up. */
  if (rank == 0 && last > 0) { MPI_Send(buf, 8, MPI_CHAR, last, 0, MPI_COMM_WORLD); MPI_Recv(buf, 8, MPI_CHAR, last, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
  else if (rank == last && last > 0) { MPI_Recv(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD); }
  double t0 = MPI_Wtime();
  for (int i = 0; i < 100; i++) {
    if (rank == 0) { MPI_Send(buf, 8, MPI_CHAR, last, 0, MPI_COMM_WORLD); MPI_Recv(buf, 8, MPI_CHAR, last, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    else if (rank == last) { MPI_Recv(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD); }
  }
  double rtt = (MPI_Wtime() - t0) / 100;
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  for (long sent = 0, n = 0; sent < bytes; sent += chunk, n++) {
    if (rank == 0) { memset(buf, (int)(n % 251), chunk); MPI_Send(buf, chunk, MPI_CHAR, last, 1, MPI_COMM_WORLD); }
    else if (rank == last) {
      MPI_Recv(buf, chunk, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int k = 0; k < chunk; k++) if (buf[k] != (char)(n % 251)) { bad = 1; break; }
    }
  }
  if (rank == last) MPI_Send(&bad, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
  if (rank == 0) MPI_Recv(&bad, 1, MPI_INT, last, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  double secs = MPI_Wtime() - t0;
  long mine = rank + 1, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("ranks=%d rtt_us=%.1f bytes=%ld seconds=%.4f rate_Bps=%.0f data=%s allreduce=%s\n",
           size, rtt * 1e6, bytes, secs, bytes / secs, bad ? "BAD" : "ok",
           total == (long)size * (size + 1) / 2 ? "ok" : "BAD");
  MPI_Finalize();
  return 0;
}
