// SPDX-License-Identifier: MIT
/* See internal/cpu_affinity.h. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "shmem/internal/cpu_affinity.h"

int mori_cpu_list_parse(const char *text, cpu_set_t *out) {
  CPU_ZERO(out);
  const char *p = text;
  while (*p && *p != '\n') {
    char *end;
    errno = 0;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p || errno || lo < 0) return mori_error_set(MORI_EINVAL, "CPU list \"%.60s\" is malformed", text);
    p = end;
    if (*p == '-') {
      hi = strtol(p + 1, &end, 10);
      if (end == p + 1 || hi < lo) return mori_error_set(MORI_EINVAL, "CPU list \"%.60s\" is malformed", text);
      p = end;
    }
    if (hi >= CPU_SETSIZE) return mori_error_set(MORI_ERANGE, "CPU list \"%.60s\": CPU %ld is beyond %d", text, hi, CPU_SETSIZE);
    for (long c = lo; c <= hi; c++) CPU_SET((int)c, out);
    if (*p == ',') p++;
    else if (*p && *p != '\n') return mori_error_set(MORI_EINVAL, "CPU list \"%.60s\" is malformed", text);
  }
  return 0;
}

void mori_cpu_list_format(const cpu_set_t *set, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE && used + 24 < len; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set)) last++;
    used += (size_t)snprintf(out + used, len - used, last > c ? "%s%d-%d" : "%s%d", used ? "," : "", c, last);
    c = last;
  }
}

/* One line of a sysfs file, without its newline. */
static int read_line(const char *path, char *out, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return mori_error_set(MORI_ENOENT, "cannot read %s: %s", path, strerror(errno));
  bool ok = fgets(out, (int)len, f) != NULL;
  fclose(f);
  if (!ok) return mori_error_set(MORI_ENOENT, "%s is empty", path);
  out[strcspn(out, "\n")] = '\0';
  return 0;
}

static int gpu_cpus(const char *root, const char *pci, cpu_set_t *cpus, char *text, size_t len) {
  char path[512];
  snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/local_cpulist", root, pci);
  int rc = read_line(path, text, len);
  return rc ? rc : mori_cpu_list_parse(text, cpus);
}

/* The NUMA node of a PCI device (-1 when sysfs does not know one). */
static int gpu_node(const char *root, const char *pci) {
  char path[512], text[32];
  snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", root, pci);
  if (read_line(path, text, sizeof(text)) != 0) return -1;
  return atoi(text);
}

/* The core a CPU belongs to: the lowest CPU of its SMT siblings (itself
 * when sysfs does not say). */
static int core_of(const char *root, int cpu) {
  char path[512], text[256];
  snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/topology/thread_siblings_list", root, cpu);
  cpu_set_t siblings;
  if (read_line(path, text, sizeof(text)) != 0 || mori_cpu_list_parse(text, &siblings) != 0) return cpu;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &siblings)) return c;
  return cpu;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int mori_cpu_affinity_compute(const mori_cpu_affinity_input_t *in, cpu_set_t *out, char *why, size_t why_len) {
  char scratch[2];
  if (!why) {
    why = scratch;
    why_len = sizeof(scratch);
  }
  why[0] = '\0';
  CPU_ZERO(out);
  if (!in || in->gpu < 0 || in->gpu >= in->num_gpus)
    return mori_error_set(MORI_EINVAL, "cpu affinity: GPU index %d of %d", in ? in->gpu : -1, in ? in->num_gpus : 0);
  const char *root = in->sysfs_root, *mine = in->gpu_pci[in->gpu];
  cpu_set_t local;
  char local_text[512];
  int rc = gpu_cpus(root, mine, &local, local_text, sizeof(local_text));
  if (rc) return mori_error_context(rc, "cpu affinity of GPU %s", mine);
  int node = gpu_node(root, mine);
  /* The GPUs on this node, in PCI-address order: a GPU's place among them
   * is its slice. Without a node number, the same local CPU list counts. */
  const char **same = calloc((size_t)in->num_gpus, sizeof(*same));
  if (!same) return mori_error_set(MORI_ENOMEM, "cpu affinity");
  int n = 0;
  for (int g = 0; g < in->num_gpus; g++) {
    bool together = g == in->gpu;
    if (!together && node >= 0) together = gpu_node(root, in->gpu_pci[g]) == node;
    if (!together && node < 0) {
      cpu_set_t other;
      char text[512];
      together = gpu_cpus(root, in->gpu_pci[g], &other, text, sizeof(text)) == 0 && CPU_EQUAL(&other, &local);
    }
    if (together) same[n++] = in->gpu_pci[g];
  }
  qsort(same, (size_t)n, sizeof(*same), compare_strings);
  int slot = 0;
  while (slot < n && strcmp(same[slot], mine) != 0) slot++;
  free(same);
  cpu_set_t usable;
  CPU_AND(&usable, &local, in->allowed);
  if (CPU_COUNT(&usable) == 0) {
    char allowed[256];
    mori_cpu_list_format(in->allowed, allowed, sizeof(allowed));
    return mori_error_set(MORI_EINVAL, "cpu affinity: none of GPU %s's CPUs (%s) is in this thread's set (%s)", mine,
                          local_text, allowed);
  }
  /* Physical cores of the usable CPUs, ordered by their first usable CPU. */
  int cores[CPU_SETSIZE], num_cores = 0;
  int core_index_of[CPU_SETSIZE];
  for (int c = 0; c < CPU_SETSIZE; c++) {
    core_index_of[c] = -1;
    if (!CPU_ISSET(c, &usable)) continue;
    int core = core_of(root, c), k = 0;
    while (k < num_cores && cores[k] != core) k++;
    if (k == num_cores) cores[num_cores++] = core;
    core_index_of[c] = k;
  }
  int first = 0, last = num_cores; /* the slice: cores [first, last) */
  bool sliced = in->split && n > 1 && num_cores >= n;
  if (sliced) {
    first = slot * num_cores / n;
    last = (slot + 1) * num_cores / n;
  }
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (core_index_of[c] >= first && core_index_of[c] < last) CPU_SET(c, out);
  char chosen[256];
  mori_cpu_list_format(out, chosen, sizeof(chosen));
  char node_text[24];
  snprintf(node_text, sizeof(node_text), node >= 0 ? "NUMA node %d" : "no NUMA node", node);
  if (sliced)
    snprintf(why, why_len, "GPU %s, %s, %d GPUs there: slice %d of %d, cores %d-%d of %d: CPUs %s", mine, node_text, n,
             slot, n, first, last - 1, num_cores, chosen);
  else
    snprintf(why, why_len, "GPU %s, %s, %d GPU(s) there%s: the node's %d core(s): CPUs %s", mine, node_text, n,
             !in->split ? ", MORI_CPU_AFFINITY_NO_SPLIT" : n > 1 ? ", fewer cores than GPUs" : "", num_cores, chosen);
  return 0;
}

static bool env_set(const char *name) { return mori_env_bool_or(name, false); }

bool mori_cpu_affinity_bind_thread(int device) {
  if (env_set("MORI_IGNORE_CPU_AFFINITY")) {
    MORI_DEBUG("shmem: MORI_IGNORE_CPU_AFFINITY is set: the init thread keeps its CPUs");
    return false;
  }
  /* The sysfs reads below are mori's only topology detection (NICs are
   * chosen by local rank, not by PCI distance): without them there is
   * nothing to place the thread by. */
  if (env_set("MORI_DISABLE_TOPO")) {
    MORI_DEBUG("shmem: MORI_DISABLE_TOPO is set: no topology detection, the init thread keeps its CPUs");
    return false;
  }
  int count = 0;
  if (mori_platform_device_count(&count) != 0 || count < 1 || device < 0 || device >= count) {
    MORI_DEBUG("shmem: not pinning the init thread: no GPU topology (%s)", mori_last_error());
    mori_clear_error();
    return false;
  }
  char(*pci)[32] = calloc((size_t)count, sizeof(*pci));
  const char **names = calloc((size_t)count, sizeof(*names));
  bool pinned = false;
  int rc = pci && names ? 0 : mori_error_set(MORI_ENOMEM, "cpu affinity");
  for (int d = 0; !rc && d < count; d++) {
    rc = mori_platform_device_pci_bus_id(d, pci[d], sizeof(pci[d]));
    names[d] = pci[d];
  }
  cpu_set_t allowed, chosen;
  if (!rc && pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0)
    rc = mori_error_set(MORI_EIO, "cpu affinity: reading this thread's CPU set");
  char why[512] = "";
  if (!rc) {
    mori_cpu_affinity_input_t in = {
        .sysfs_root = "/sys",
        .gpu_pci = names,
        .num_gpus = count,
        .gpu = device,
        .allowed = &allowed,
        .split = !env_set("MORI_CPU_AFFINITY_NO_SPLIT"),
    };
    rc = mori_cpu_affinity_compute(&in, &chosen, why, sizeof(why));
  }
  if (!rc && pthread_setaffinity_np(pthread_self(), sizeof(chosen), &chosen) != 0)
    rc = mori_error_set(MORI_EIO, "cpu affinity: setting this thread's CPU set (%s)", why);
  if (rc == MORI_ENOTSUP) {
    /* The host platform: CPU PEs have no GPU to be near. */
    MORI_DEBUG("shmem: the init thread keeps its CPUs: %s", mori_last_error());
    mori_clear_error();
  } else if (rc) {
    MORI_WARN("shmem: the init thread keeps its CPUs: %s (set MORI_IGNORE_CPU_AFFINITY=1 to silence)", mori_last_error());
    mori_clear_error();
  } else {
    MORI_INFO("shmem: init thread pinned: %s", why);
    pinned = true;
  }
  free(pci);
  free(names);
  return pinned;
}
