/* A stand-in for Graph500's reference BFS, as a newcomer meets it: every rank computes
 * its share of the work (real computation, not sleep), then exchanges a frontier with
 * every other rank, waiting for it by busy-polling (a loop of MPI_Testall that never
 * yields the core, as Open MPI's progress engine does by default), and at the end rank 0
 * prints a rate the way Graph500 does:
 *
 *     bfs  harmonic_mean_TEPS:     !  2.07694e+06
 *
 * Usage: standin [iterations [bytes_per_node [work_ms]]]: each iteration sends
 * bytes_per_node / (p - 1) bytes to every other rank and computes work_ms / p ms of work
 * (strong scaling: the work is shared, each node's traffic is the same at every size). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile double sink;

/* About `ms` milliseconds of arithmetic on this core. */
static void compute(double ms) {
    double start = MPI_Wtime(), x = 1.0;
    while ((MPI_Wtime() - start) * 1e3 < ms) {
        for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1e-9;
    }
    sink = x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 20;
    long per_node = argc > 2 ? atol(argv[2]) : 65536;
    double work_ms = argc > 3 ? atof(argv[3]) : 80.0;
    long per_peer = size > 1 ? per_node / (size - 1) : 0;
    char *out = malloc(per_peer > 0 ? per_peer : 1), *in = malloc(per_peer * (size > 1 ? size : 1) + 1);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size > 1 ? size : 1));
    memset(out, rank, per_peer > 0 ? per_peer : 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 0; it < iterations; it++) {
        compute(work_ms / size);
        int n = 0;
        for (int peer = 0; peer < size; peer++) {
            if (peer == rank) continue;
            MPI_Irecv(in + per_peer * peer, per_peer, MPI_CHAR, peer, it, MPI_COMM_WORLD, &req[n++]);
            MPI_Isend(out, per_peer, MPI_CHAR, peer, it, MPI_COMM_WORLD, &req[n++]);
        }
        /* Busy-poll: test, test, test, never sleep. */
        int done = 0;
        while (!done) MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
    }
    double elapsed = MPI_Wtime() - start, slowest;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* "Edges" traversed: a stand-in count that grows with the work done. */
        double edges = (double)iterations * 1e5;
        printf("bfs  harmonic_mean_TEPS:     !  %g\n", edges / slowest);
        printf("elapsed: %.6f\n", slowest);
    }
    free(out);
    free(in);
    free(req);
    MPI_Finalize();
    return 0;
}
