// SPDX-License-Identifier: MIT
/* scale_bench: the cost of a job's set-up steps against the rank count, on
 * the host platform (CPU ranks as processes of this machine, several per
 * simulated node through MORI_HOST_ID).
 *
 * For each rank count it launches a job (tools/launch) whose ranks time, in
 * order: the bootstrap's start-up (from the launch, so the forks count), an
 * allgather of small records, a barrier, a broadcast, comm creation, a
 * window's create + rendezvous + destroy, and team construction (the four
 * predefined teams and two splits). Each repeated step starts after an
 * untimed barrier, so the ranks start it together. Per step the ranks report
 * their median wall time and CPU time over the repetitions; rank 0 prints
 * one JSON line per step with the slowest rank's wall time, the most CPU any
 * one rank spent, rank 0's own CPU and the CPU of all ranks together. On a
 * machine with fewer cores than ranks the wall time measures the work of all
 * ranks together plus the wake-ups between them; the CPU of the busiest rank
 * is what serialises a job whose ranks each have a core.
 *
 *   scale_bench [-r 2,4,...] [-p ranks_per_node] [-i reps] [-b record_bytes] [-l label]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mori/bootstrap.h"
#include "mori/comm.h"
#include "mori/handle_fabric.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/team.h"
#include "mori/transport_p2p.h"
#include "mori/window.h"
#include "tools/launch/launch.h"

enum { STEP_INIT, STEP_ALLGATHER, STEP_BARRIER, STEP_BCAST, STEP_COMM, STEP_WINDOW, STEP_TEAMS, STEP_COUNT };
static const char *const step_names[STEP_COUNT] = {"bootstrap_init", "allgather", "barrier", "bcast",
                                                    "comm_create",    "window",    "teams"};
/* Comm creation and windows cost far more than the rest: fewer repetitions. */
static const int step_rep_div[STEP_COUNT] = {1, 1, 1, 1, 4, 2, 1};

struct config {
  int per_node;
  int reps;
  int record_bytes;
  int64_t launched_ns; /* CLOCK_MONOTONIC is one clock for every process */
  const char *label;
};

/* What one rank measured, all-gathered at the end (microseconds). */
struct rank_stats {
  double wall_us[STEP_COUNT];
  double cpu_us[STEP_COUNT];
};

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int fail(int rank, const char *what, int rc) {
  fprintf(stderr, "scale_bench: rank %d: %s -> %s: %s\n", rank, what, mori_err_name(rc), mori_last_error());
  return 1;
}

/* One repetition of a step (after the untimed barrier); 0 or a mori code. */
static int run_step(int step, mori_bootstrap_t *b, const mori_comm_attr_t *attr, mori_comm_t *comm, void *mem,
                    const struct config *cfg, char *send, char *recv) {
  int rc = 0;
  switch (step) {
  case STEP_ALLGATHER:
    return mori_bootstrap_allgather(b, send, recv, (size_t)cfg->record_bytes);
  case STEP_BARRIER:
    return mori_bootstrap_barrier(b);
  case STEP_BCAST:
    return mori_bootstrap_bcast(b, send, (size_t)cfg->record_bytes, 0);
  case STEP_COMM: {
    mori_comm_t *c = NULL;
    rc = mori_comm_create(attr, &c);
    if (!rc) rc = mori_comm_destroy(c);
    return rc;
  }
  case STEP_WINDOW: {
    mori_window_t *w = NULL;
    rc = mori_window_create(comm, mem, &w);
    if (!rc) rc = mori_window_destroy(w);
    return rc;
  }
  case STEP_TEAMS: {
    mori_team_t t[4], x, y, even;
    for (int k = 0; k < 4 && !rc; k++) rc = mori_team_get(comm, (mori_team_kind_t)k, &t[k]);
    if (!rc) rc = mori_team_split_2d(&t[0], t[1].size, &x, &y); /* rows are the nodes */
    if (!rc) rc = mori_team_split_strided(&t[0], 0, 2, t[0].size / 2 > 0 ? t[0].size / 2 : 1, &even);
    return rc;
  }
  }
  return 0;
}

static void print_results(const struct config *cfg, int size, const struct rank_stats *all) {
  int nodes = (size + cfg->per_node - 1) / cfg->per_node;
  double *v = malloc(sizeof(double) * (size_t)size);
  if (!v) return;
  for (int step = 0; step < STEP_COUNT; step++) {
    double wall_max = 0, cpu_max = 0, cpu_sum = 0;
    int cpu_max_rank = 0;
    for (int r = 0; r < size; r++) {
      if (all[r].wall_us[step] > wall_max) wall_max = all[r].wall_us[step];
      if (all[r].cpu_us[step] > cpu_max) {
        cpu_max = all[r].cpu_us[step];
        cpu_max_rank = r;
      }
      cpu_sum += all[r].cpu_us[step];
      v[r] = all[r].wall_us[step];
    }
    int reps = step == STEP_INIT ? 1 : (cfg->reps / step_rep_div[step] > 0 ? cfg->reps / step_rep_div[step] : 1);
    printf("{\"bench\":\"scale\",\"label\":\"%s\",\"step\":\"%s\",\"ranks\":%d,\"per_node\":%d,\"nodes\":%d,"
           "\"reps\":%d,\"record_bytes\":%d,\"wall_us_max\":%.1f,\"wall_us_median\":%.1f,\"cpu_us_max\":%.1f,"
           "\"cpu_us_max_rank\":%d,\"cpu_us_rank0\":%.1f,\"cpu_us_sum\":%.1f,\"cores\":%ld}\n",
           cfg->label, step_names[step], size, cfg->per_node, nodes, reps, cfg->record_bytes, wall_max,
           median(v, size), cpu_max, cpu_max_rank, all[0].cpu_us[step], cpu_sum, sysconf(_SC_NPROCESSORS_ONLN));
  }
  fflush(stdout);
  free(v);
}

static int rank_main(int rank, int size, void *arg) {
  const struct config *cfg = arg;
  char host[32];
  snprintf(host, sizeof(host), "node-%d", rank / cfg->per_node);
  setenv("MORI_HOST_ID", host, 1);
  struct rank_stats mine;
  memset(&mine, 0, sizeof(mine));
  mori_bootstrap_t *b = NULL;
  int rc = mori_bootstrap_tcp_from_env(&b);
  if (rc) return fail(rank, "bootstrap start-up", rc);
  mine.wall_us[STEP_INIT] = (double)(clock_ns(CLOCK_MONOTONIC) - cfg->launched_ns) / 1e3;
  mine.cpu_us[STEP_INIT] = (double)clock_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e3;

  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = b;
  attr.handles = handles;
  attr.num_handles = 2;
  attr.transports = transports;
  attr.num_transports = 1;
  mori_comm_t *comm = NULL;
  void *mem = NULL;
  char *send = calloc(1, (size_t)cfg->record_bytes);
  char *recv = calloc((size_t)size, (size_t)cfg->record_bytes);
  double *wall = calloc((size_t)cfg->reps, sizeof(double)), *cpu = calloc((size_t)cfg->reps, sizeof(double));
  if (!send || !recv || !wall || !cpu) return fail(rank, "allocating the benchmark's buffers", MORI_ENOMEM);
  memset(send, rank & 0xff, (size_t)cfg->record_bytes);
  rc = mori_comm_create(&attr, &comm);
  if (rc) return fail(rank, "comm creation", rc);
  rc = mori_mem_alloc(1 << 16, NULL, &mem);
  if (rc) return fail(rank, "mori_mem_alloc of 64 KiB", rc);

  for (int step = STEP_ALLGATHER; step < STEP_COUNT; step++) {
    int reps = cfg->reps / step_rep_div[step] > 0 ? cfg->reps / step_rep_div[step] : 1;
    for (int i = 0; i < reps; i++) {
      rc = mori_bootstrap_barrier(b);
      if (rc) return fail(rank, "the barrier before a step", rc);
      int64_t w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
      rc = run_step(step, b, &attr, comm, mem, cfg, send, recv);
      wall[i] = (double)(clock_ns(CLOCK_MONOTONIC) - w0) / 1e3;
      cpu[i] = (double)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / 1e3;
      if (rc) return fail(rank, step_names[step], rc);
    }
    if (step == STEP_ALLGATHER)
      for (int r = 0; r < size; r++)
        if (recv[(size_t)r * (size_t)cfg->record_bytes] != (char)(r & 0xff)) {
          fprintf(stderr, "scale_bench: rank %d: the allgather's record of rank %d is wrong\n", rank, r);
          return 1;
        }
    mine.wall_us[step] = median(wall, reps);
    mine.cpu_us[step] = median(cpu, reps);
  }

  struct rank_stats *all = calloc((size_t)size, sizeof(*all));
  if (!all) return fail(rank, "allocating the results", MORI_ENOMEM);
  rc = mori_bootstrap_allgather(b, &mine, all, sizeof(mine));
  if (rc) return fail(rank, "gathering the results", rc);
  if (rank == 0) print_results(cfg, size, all);
  mori_mem_free(mem);
  mori_comm_destroy(comm);
  mori_bootstrap_destroy(b);
  free(all);
  free(send);
  free(recv);
  free(wall);
  free(cpu);
  return 0;
}

int main(int argc, char **argv) {
  const char *ranks_list = "2,4,8,16,32,64,128";
  struct config cfg = {.per_node = 8, .reps = 20, .record_bytes = 64, .label = "run"};
  int timeout_s = 600, opt;
  while ((opt = getopt(argc, argv, "r:p:i:b:l:t:h")) != -1) {
    if (opt == 'r') ranks_list = optarg;
    else if (opt == 'p') cfg.per_node = atoi(optarg);
    else if (opt == 'i') cfg.reps = atoi(optarg);
    else if (opt == 'b') cfg.record_bytes = atoi(optarg);
    else if (opt == 'l') cfg.label = optarg;
    else if (opt == 't') timeout_s = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s [-r 2,4,8,...] [-p ranks_per_node] [-i reps] [-b record_bytes] [-l label] [-t s]\n",
              argv[0]);
      return opt == 'h' ? 0 : 2;
    }
  }
  if (cfg.per_node < 1 || cfg.reps < 1 || cfg.record_bytes < 1) {
    fprintf(stderr, "scale_bench: -p, -i and -b must be positive\n");
    return 2;
  }
  /* 128 ranks' start-up lines would bury the results. */
  setenv("MORI_LOG_LEVEL", "warn", 0);
  char *list = strdup(ranks_list);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int size = atoi(tok);
    static mori_launch_result_t result;
    cfg.launched_ns = clock_ns(CLOCK_MONOTONIC);
    int rc = mori_launch_local(size, timeout_s * 1000, rank_main, &cfg, &result);
    if (rc) {
      fprintf(stderr, "scale_bench: %d ranks: %s\n", size, result.message);
      free(list);
      return 1;
    }
  }
  free(list);
  return 0;
}
