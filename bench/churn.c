/* Connection churn, as an attacker on the same machine makes it (issue 43, finding 3):
 * open a TCP connection to HOST:PORT and close it HOLD_MS later (0: at once), again and
 * again, at RATE connections a second (0: as fast as one thread can) for SECONDS; prints
 * the rate it reached and how many connects failed. Nothing is sent.
 * Usage: churn HOST PORT RATE SECONDS [HOLD_MS]   (bench/churn.sh runs it as another user) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: churn HOST PORT RATE SECONDS [HOLD_MS]\n");
    return 2;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
    fprintf(stderr, "churn: %s is no IPv4 address\n", argv[1]);
    return 2;
  }
  double rate = atof(argv[3]), secs = atof(argv[4]);
  double hold = argc == 6 ? atof(argv[5]) / 1000 : 0;
  enum { RING = 65536 };
  static int fds[RING];
  static double opened[RING];
  long head = 0, tail = 0; /* open connections: fds[tail..head) */
  double start = now(), end = start + secs;
  long done = 0, failed = 0;
  while (now() < end) {
    if (rate > 0) {
      double due = start + done / rate;
      double wait = due - now();
      if (wait > 0) usleep((useconds_t)(wait * 1e6));
    }
    while (tail < head && (now() - opened[tail % RING] >= hold || head - tail >= RING))
      close(fds[tail++ % RING]);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { failed++; usleep(1000); continue; }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) failed++;
    if (hold > 0) {
      fds[head % RING] = fd;
      opened[head++ % RING] = now();
    } else {
      close(fd);
    }
    done++;
  }
  while (tail < head) close(fds[tail++ % RING]);
  printf("%.0f %ld\n", done / (now() - start), failed);
  return 0;
}
