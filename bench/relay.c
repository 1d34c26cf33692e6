/* The least a user-space TCP relay does, for bench/latency.sh: where the time of a hop
   goes when nothing else is done. Usage: relay LISTEN_ADDR LISTEN_PORT TARGET_ADDR
   TARGET_PORT [spin]. Every accepted connection gets a connection to the target and two
   threads that copy one direction each with blocking read/write (TCP_NODELAY on both
   sides); with `spin` they poll with non-blocking reads instead of sleeping, as a
   busy-polling relay would (one core per direction while it runs). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int spin;
struct pair { int from, to; };

static void *copy(void *arg) {
  struct pair p = *(struct pair *)arg;
  free(arg);
  char buf[65536];
  for (;;) {
    ssize_t n = recv(p.from, buf, sizeof buf, spin ? MSG_DONTWAIT : 0);
    if (n < 0 && spin && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(p.to, buf + off, n - off);
      if (w <= 0) goto done;
      off += w;
    }
  }
done:
  shutdown(p.to, SHUT_WR);
  return NULL;
}

static struct sockaddr_in addr(const char *host, const char *port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) { fprintf(stderr, "relay: bad address %s\n", host); exit(2); }
  return a;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: relay LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT [spin]\n"); return 2; }
  spin = argc > 5 && strcmp(argv[5], "spin") == 0;
  struct sockaddr_in l = addr(argv[1], argv[2]), t = addr(argv[3], argv[4]);
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, (struct sockaddr *)&l, sizeof l) || listen(s, 128)) { perror("relay: listen"); return 1; }
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    int d = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(d, (struct sockaddr *)&t, sizeof t)) { perror("relay: connect"); close(c); close(d); continue; }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(d, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t th;
    struct pair *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    *a = (struct pair){c, d};
    *b = (struct pair){d, c};
    pthread_create(&th, NULL, copy, a);
    pthread_detach(th);
    pthread_create(&th, NULL, copy, b);
    pthread_detach(th);
  }
}
