// SPDX-License-Identifier: MIT
/* mori_launch: runs N ranks of a program on this machine with the bootstrap
 * environment set; see usage() and docs/launch.md. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/launch/launch.h"
#include "tools/launch/rank_output.h"

/* Exit codes of the launcher itself (a failed rank's code passes through). */
enum { EXIT_USAGE = 2, EXIT_TIMEOUT = 124, EXIT_CANNOT_RUN = 127, EXIT_SIGNAL_BASE = 128 };

static char **program_argv;
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) { interrupted = sig; }

static void usage(FILE *to, const char *argv0) {
  fprintf(to,
          "usage: %s [-n RANKS] [-t SECONDS] [--no-prefix] program [args...]\n"
          "\n"
          "Runs RANKS processes of program on this machine, each with the environment\n"
          "a mori job starts from: MORI_RANK, MORI_WORLD_SIZE, MORI_LOCAL_RANK,\n"
          "MORI_LOCAL_SIZE, MORI_BOOTSTRAP_ADDR (rank 0 gets the listening socket) and a\n"
          "fresh MORI_BOOTSTRAP_SECRET.\n"
          "\n"
          "  -n, --ranks RANKS      how many ranks (1..%d; default 2)\n"
          "  -t, --timeout SECONDS  stop the job after this long (default 600)\n"
          "      --no-prefix        leave ranks' output as it is (default: each line of a\n"
          "                         rank's stdout and stderr starts with \"[RANK] \")\n"
          "  -h, --help             this text\n"
          "\n"
          "When a rank exits non-zero or is killed, every other rank is stopped at once\n"
          "(SIGTERM, then SIGKILL after %d ms) and the launcher names the rank.\n"
          "\n"
          "Exit status: 0 when every rank exited 0; the failed rank's own exit code;\n"
          "128+N when it was killed by signal N; 124 when the time limit ended the job;\n"
          "128+N when the launcher got signal N (INT, TERM, HUP); 127 when program\n"
          "cannot be run; 2 for a usage error.\n",
          argv0, MORI_LAUNCH_MAX_RANKS, MORI_LAUNCH_GRACE_MS);
}

static int exec_rank(int rank, int size, void *arg) {
  (void)size;
  (void)arg;
  signal(SIGPIPE, SIG_DFL); /* the launcher ignores it; the program gets the default */
  execvp(program_argv[0], program_argv);
  fprintf(stderr, "mori_launch: rank %d: cannot run %s: %s\n", rank, program_argv[0], strerror(errno));
  return EXIT_CANNOT_RUN;
}

/* A whole positive number within [1, max], or -1. */
static long parse_count(const char *text, long max) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < 1 || v > max) return -1;
  return v;
}

int main(int argc, char **argv) {
  long size = 2, timeout_s = 600;
  int prefix = 1, opt;
  enum { OPT_NO_PREFIX = 1000 };
  static const struct option longopts[] = {
      {"ranks", required_argument, NULL, 'n'},
      {"timeout", required_argument, NULL, 't'},
      {"no-prefix", no_argument, NULL, OPT_NO_PREFIX},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  while ((opt = getopt_long(argc, argv, "+n:t:h", longopts, NULL)) != -1) {
    if (opt == 'n') {
      if ((size = parse_count(optarg, MORI_LAUNCH_MAX_RANKS)) < 0) {
        fprintf(stderr, "mori_launch: -n %s: want a number of ranks from 1 to %d\n", optarg, MORI_LAUNCH_MAX_RANKS);
        return EXIT_USAGE;
      }
    } else if (opt == 't') {
      if ((timeout_s = parse_count(optarg, INT_MAX / 1000)) < 0) {
        fprintf(stderr, "mori_launch: -t %s: want a whole number of seconds from 1 to %d\n", optarg, INT_MAX / 1000);
        return EXIT_USAGE;
      }
    } else if (opt == OPT_NO_PREFIX) {
      prefix = 0;
    } else if (opt == 'h') {
      usage(stdout, argv[0]);
      return 0;
    } else {
      usage(stderr, argv[0]);
      return EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "mori_launch: no program given\n");
    usage(stderr, argv[0]);
    return EXIT_USAGE;
  }
  program_argv = argv + optind;

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  /* A reader that leaves (mori_launch ... | head -1) ends the launcher's
   * output, not the job: writes to it fail and the output is dropped. */
  signal(SIGPIPE, SIG_IGN);

  mori_launch_options_t opts = {
      .size = (int)size,
      .timeout_ms = (int)(timeout_s * 1000),
      .prefix_output = prefix,
      .die_with_launcher = 1,
      .process_groups = 1,
      .stop = &interrupted,
  };
  static mori_launch_result_t result;
  int rc = mori_launch_run(&opts, exec_rank, NULL, &result);
  if (rc == 0) return 0;
  /* Bounded like the ranks' lines: a reader that never reads does not
   * keep the launcher from exiting. */
  char line[sizeof(result.message) + 32];
  int n = snprintf(line, sizeof(line), "mori_launch: %s\n", result.message);
  rank_output_write_until(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1,
                          rank_output_now_ms() + 2000);
  if (result.failed_rank >= 0) {
    int code = result.exit_code[result.failed_rank];
    return code > 0 ? code : EXIT_SIGNAL_BASE - code;
  }
  if (result.timed_out) return EXIT_TIMEOUT;
  if (result.interrupted) return EXIT_SIGNAL_BASE + interrupted;
  return 1;
}
