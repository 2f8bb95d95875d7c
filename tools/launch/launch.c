// SPDX-License-Identifier: MIT
/* Local multi-process launcher; see launch.h. */
#include "tools/launch/launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/rank_output.h"

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

/* The job as the launcher watches it. */
typedef struct job {
  int size;
  int groups;      /* signal each rank's process group */
  pid_t *pids;     /* 0 once reaped */
  pid_t *leaders;  /* each rank's first pid, its process group's id */
  int running;
  long long stop_at;     /* when the rest were sent SIGTERM; 0: not yet */
  int killed;            /* SIGKILL sent to whoever was left */
  mori_launch_result_t *result;
} job_t;

static void signal_running(job_t *j, int sig) {
  for (int r = 0; r < j->size; r++) {
    if (j->groups && j->leaders[r] > 0) kill(-j->leaders[r], sig); /* what it started, even once it is gone */
    else if (j->pids[r] > 0) kill(j->pids[r], sig);
  }
}

/* Stops every rank still running: SIGTERM now, SIGKILL after the grace. */
static void stop_all(job_t *j) {
  if (j->stop_at) return;
  j->stop_at = rank_output_now_ms();
  signal_running(j, SIGTERM);
}

/* Records rank r's end; returns its code when it failed on its own, else 0. */
static int record_exit(job_t *j, int r, int status) {
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  /* After the limit or an interrupt, every end is ours: a rank that
   * handles SIGTERM and exits 1 was stopped, it did not fail. */
  bool by_us = j->stop_at && (code == -SIGTERM || code == -SIGKILL || j->result->timed_out || j->result->interrupted);
  j->result->exit_code[r] = by_us ? MORI_LAUNCH_STOPPED : code;
  j->pids[r] = 0;
  j->running--;
  return by_us ? 0 : code;
}

/* Reaps every rank that ended. The cause, when none is named yet, is
 * chosen among the ranks of this batch: one killed by a signal before one
 * that exited with an error (the others of a mori job exit with an error
 * within milliseconds of a peer's death, and waitpid's order is not the
 * order in which they died). */
static void reap(job_t *j) {
  int status, crashed = -1, exited = -1;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
    for (int r = 0; r < j->size; r++)
      if (j->pids[r] == pid) {
        int code = record_exit(j, r, status);
        if (code < 0 && crashed < 0) crashed = r;
        if (code > 0 && exited < 0) exited = r;
      }
  if (j->result->failed_rank < 0) j->result->failed_rank = crashed >= 0 ? crashed : exited;
}

/* Appends the text to the result's message, "; " between parts. */
static void append(mori_launch_result_t *res, const char *text) {
  size_t used = strlen(res->message);
  if (used + 1 >= sizeof(res->message)) return;
  snprintf(res->message + used, sizeof(res->message) - used, "%s%s", used ? "; " : "", text);
}

static void describe(job_t *j, int timeout_ms) {
  mori_launch_result_t *res = j->result;
  char buf[192];
  /* The cause first, then any other rank that failed on its own. */
  for (int pass = 0; pass < 2; pass++) {
    for (int r = 0; r < j->size; r++) {
      if ((pass == 0) != (r == res->failed_rank)) continue;
      int code = res->exit_code[r];
      if (code > 0) snprintf(buf, sizeof(buf), "rank %d exited with code %d", r, code);
      else if (code < 0 && code > MORI_LAUNCH_HUNG)
        snprintf(buf, sizeof(buf), "rank %d was killed by signal %d (%s)", r, -code, strsignal(-code));
      else continue;
      append(res, buf);
    }
  }
  /* Then the ranks stopped, or still running at the limit, as one list. */
  for (int kind = 0; kind < 2; kind++) {
    int want = kind == 0 ? MORI_LAUNCH_HUNG : MORI_LAUNCH_STOPPED;
    size_t n = 0;
    int count = 0;
    for (int r = 0; r < j->size; r++) {
      if (res->exit_code[r] != want) continue;
      if (n < sizeof(buf) - 16) n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d", count ? ", " : "", r);
      count++;
    }
    if (!count) continue;
    char line[320];
    if (kind == 0)
      snprintf(line, sizeof(line), "rank%s %s did not finish in %g s (stopped)", count > 1 ? "s" : "", buf,
               timeout_ms / 1000.0);
    else
      snprintf(line, sizeof(line), "rank%s %s stopped%s", count > 1 ? "s" : "", buf,
               res->interrupted ? " (the launcher was interrupted)" : res->failed_rank >= 0 ? " after it" : "");
    append(res, line);
  }
}

/* Descriptors 0 to 2 that the caller closed (`>&-`) open on /dev/null:
 * left free, the next descriptor the launcher makes (rank 0's listening
 * socket, an output pipe) would take one, and a rank's redirection of its
 * output would then replace it. */
static void fill_closed_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (got >= 0 && got != fd) close(got); /* a lower one was free after all: leave it */
    }
}

/* A rank's stdin: what the launcher was given goes to rank 0 alone (as
 * other launchers do: ranks reading one pipe would take each other's
 * lines), the others read /dev/null. A terminal goes to nobody when ranks
 * lead process groups of their own: none is the terminal's foreground
 * group, so a read would stop the rank (SIGTTIN) until the time limit. */
static void quiet_stdin(int rank, bool own_groups) {
  if (rank == 0 && !(own_groups && isatty(STDIN_FILENO))) return;
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) return;
  if (null != STDIN_FILENO) {
    dup2(null, STDIN_FILENO); /* dup2's copy does not keep O_CLOEXEC */
    close(null);
  } else {
    fcntl(null, F_SETFD, 0);
  }
}

int mori_launch_run(const mori_launch_options_t *opts, mori_rank_fn fn, void *arg, mori_launch_result_t *result) {
  memset(result, 0, sizeof(*result));
  result->failed_rank = -1;
  fill_closed_std_fds();
  int size = opts->size;
  int timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 600000;
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
  rank_output_t *output = NULL;
  if (opts->prefix_output && !(output = rank_output_create(size))) {
    snprintf(result->message, sizeof(result->message),
             "launch: cannot make pipes for %d ranks' output: %s (4 descriptors per rank: raise `ulimit -n`, or leave "
             "the output unprefixed)",
             size, strerror(errno));
    close(listen_fd);
    return MORI_EIO;
  }
  fflush(stdout);
  fflush(stderr);
  job_t job = {.size = size, .groups = opts->process_groups, .result = result};
  job.pids = calloc((size_t)size, sizeof(pid_t));
  job.leaders = calloc((size_t)size, sizeof(pid_t));
  if (!job.pids || !job.leaders) {
    free(job.pids);
    free(job.leaders);
    close(listen_fd);
    rank_output_finish(output, 0);
    snprintf(result->message, sizeof(result->message), "launch: out of memory for %d ranks", size);
    return MORI_ENOMEM;
  }
  /* The ranks start together: each waits at this gate until the launcher
   * has forked them all. Without it rank 0 starts its bootstrap clock while
   * the later ranks are still being forked, and on a loaded machine (forking
   * a large process, many ranks) that lag ate whole startup timeouts. */
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) {
    free(job.pids);
    free(job.leaders);
    close(listen_fd);
    rank_output_finish(output, 0);
    snprintf(result->message, sizeof(result->message), "launch: cannot make the start gate: %s", strerror(errno));
    return MORI_EIO;
  }
  pid_t launcher = getpid();
  int rc = 0;
  for (int r = 0; r < size; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      snprintf(result->message, sizeof(result->message), "launch: cannot start rank %d: %s", r, strerror(errno));
      rc = MORI_EIO;
      break;
    }
    if (pid == 0) {
      close(gate[1]);
      if (opts->process_groups) setpgid(0, 0);
      quiet_stdin(r, opts->process_groups);
      if (opts->die_with_launcher) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != launcher) _exit(127); /* it died before the line above */
      }
      if (output) rank_output_attach_child(output, r);
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
      /* End of file once the launcher closed its end: every rank is forked
       * (or a fork failed, and the launcher stops those that were). */
      char byte;
      while (read(gate[0], &byte, 1) < 0 && errno == EINTR) {
      }
      close(gate[0]);
      int code = fn(r, size, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    if (opts->process_groups) setpgid(pid, pid); /* also here: no window in which a signal misses it */
    job.pids[r] = job.leaders[r] = pid;
    job.running++;
    result->exit_code[r] = MORI_LAUNCH_HUNG;
    if (output) rank_output_forked(output, r);
  }
  close(listen_fd);
  close(gate[0]);
  close(gate[1]);
  if (rc) stop_all(&job);
  long long deadline = rank_output_now_ms() + timeout_ms;
  while (job.running > 0) {
    /* Our reader may hold us until the job's limit, or a stop's grace. */
    if (output) rank_output_pump(output, 5, job.stop_at ? job.stop_at + MORI_LAUNCH_GRACE_MS : deadline);
    else {
      struct timespec pause = {0, 5 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    reap(&job);
    if (job.running == 0) break;
    long long now = rank_output_now_ms();
    if (!job.stop_at && result->failed_rank >= 0) stop_all(&job);
    if (!job.stop_at && opts->stop && *opts->stop) {
      result->interrupted = 1;
      stop_all(&job);
    }
    if (!job.stop_at && now >= deadline) {
      result->timed_out = 1;
      stop_all(&job);
    }
    if (job.stop_at && !job.killed && now >= job.stop_at + MORI_LAUNCH_GRACE_MS) {
      signal_running(&job, SIGKILL);
      job.killed = 1;
    }
  }
  /* Ranks still running at the limit were stopped as hung, not as victims. */
  if (result->timed_out)
    for (int r = 0; r < size; r++)
      if (result->exit_code[r] == MORI_LAUNCH_STOPPED) result->exit_code[r] = MORI_LAUNCH_HUNG;
  /* The ranks' last output, at the pace of whoever reads the launcher's
   * (a pipe to a slow reader held about a pipe's worth when 200 ms ran out). */
  rank_output_finish(output, 10000);
  if (!rc) {
    describe(&job, timeout_ms);
    if (result->failed_rank >= 0) rc = MORI_EIO;
    else if (result->timed_out) rc = MORI_ETIMEDOUT;
    else if (result->interrupted) rc = MORI_ECANCELED;
  }
  free(job.pids);
  free(job.leaders);
  return rc;
}

int mori_launch_local(int size, int timeout_ms, mori_rank_fn fn, void *arg, mori_launch_result_t *result) {
  mori_launch_options_t opts = {.size = size, .timeout_ms = timeout_ms};
  return mori_launch_run(&opts, fn, arg, result);
}
