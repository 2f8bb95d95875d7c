// SPDX-License-Identifier: MIT
/* Local multi-process launcher; see launch.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/launch.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

/* A fresh secret for the job, as 64 hex digits: the ranks authenticate each
 * other with it, and no other process can learn it (a process's environment
 * is readable only by its own user). */
static int draw_secret(char hex[65]) {
  unsigned char raw[32];
  if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) return -1;
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  return 0;
}

static void setenv_int(const char *name, int value) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%d", value);
  setenv(name, buf, 1);
}

int mori_launch_local(int size, int timeout_ms, mori_rank_fn fn, void *arg, mori_launch_result_t *result) {
  memset(result, 0, sizeof(*result));
  result->failed_rank = -1;
  if (size < 1 || size > MORI_LAUNCH_MAX_RANKS) {
    snprintf(result->message, sizeof(result->message), "launch: %d ranks is out of range 1..%d", size,
             MORI_LAUNCH_MAX_RANKS);
    return MORI_EINVAL;
  }
  char secret[65];
  if (draw_secret(secret) != 0) {
    snprintf(result->message, sizeof(result->message), "launch: cannot draw the job's secret: %s", strerror(errno));
    return MORI_EIO;
  }
  int port = 0;
  int listen_fd = listen_loopback(&port);
  if (listen_fd < 0) {
    snprintf(result->message, sizeof(result->message), "launch: cannot listen on loopback: %s", strerror(errno));
    return MORI_EIO;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t *pids = calloc((size_t)size, sizeof(pid_t));
  if (!pids) {
    close(listen_fd);
    snprintf(result->message, sizeof(result->message), "launch: out of memory for %d ranks", size);
    return MORI_ENOMEM;
  }
  for (int r = 0; r < size; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      char addr[64];
      snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
      setenv_int("MORI_RANK", r);
      setenv_int("MORI_WORLD_SIZE", size);
      setenv_int("MORI_LOCAL_RANK", r);
      setenv_int("MORI_LOCAL_SIZE", size);
      setenv("MORI_BOOTSTRAP_ADDR", addr, 1);
      setenv("MORI_BOOTSTRAP_SECRET", secret, 1);
      if (r == 0) {
        setenv_int("MORI_BOOTSTRAP_LISTEN_FD", listen_fd);
      } else {
        close(listen_fd);
        unsetenv("MORI_BOOTSTRAP_LISTEN_FD");
      }
      int code = fn(r, size, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
    result->exit_code[r] = -1000;
  }
  close(listen_fd);
  long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 600000);
  int running = size;
  while (running > 0 && now_ms() < deadline) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      struct timespec pause = {0, 5 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    for (int r = 0; r < size; r++) {
      if (pids[r] != pid) continue;
      result->exit_code[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      pids[r] = 0;
      running--;
    }
  }
  int rc = 0;
  size_t used = 0;
  for (int r = 0; r < size; r++) {
    const char *what = NULL;
    char buf[64];
    if (pids[r] > 0) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], NULL, 0);
      what = "did not finish in time (killed)";
      rc = rc ? rc : MORI_ETIMEDOUT;
    } else if (result->exit_code[r] > 0) {
      snprintf(buf, sizeof(buf), "exited with code %d", result->exit_code[r]);
      what = buf;
      rc = rc ? rc : MORI_EIO;
    } else if (result->exit_code[r] < 0) {
      snprintf(buf, sizeof(buf), "was killed by signal %d (%s)", -result->exit_code[r], strsignal(-result->exit_code[r]));
      what = buf;
      rc = rc ? rc : MORI_EIO;
    }
    if (what) {
      if (result->failed_rank < 0) result->failed_rank = r;
      if (used < sizeof(result->message))
        used += (size_t)snprintf(result->message + used, sizeof(result->message) - used, "%srank %d %s",
                                 used ? "; " : "", r, what);
    }
  }
  free(pids);
  return rc;
}
