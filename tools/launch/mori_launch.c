// SPDX-License-Identifier: MIT
/* mori_launch -n N [-t SECONDS] program [args...]: runs N ranks of a program
 * on this machine, with the bootstrap environment set, and reports which
 * rank failed or hung. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/launch/launch.h"

static char **program_argv;

static int exec_rank(int rank, int size, void *arg) {
  execvp(program_argv[0], program_argv);
  fprintf(stderr, "mori_launch: rank %d: cannot run %s\n", rank, program_argv[0]);
  return 127;
}

int main(int argc, char **argv) {
  int size = 2, timeout_s = 600, opt;
  while ((opt = getopt(argc, argv, "+n:t:h")) != -1) {
    if (opt == 'n') size = atoi(optarg);
    else if (opt == 't') timeout_s = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s -n RANKS [-t SECONDS] program [args...]\n", argv[0]);
      return opt == 'h' ? 0 : 2;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "usage: %s -n RANKS [-t SECONDS] program [args...]\n", argv[0]);
    return 2;
  }
  program_argv = argv + optind;
  static mori_launch_result_t result;
  int rc = mori_launch_local(size, timeout_s * 1000, exec_rank, NULL, &result);
  if (rc != 0) {
    fprintf(stderr, "mori_launch: %s\n", result.message);
    return 1;
  }
  return 0;
}
