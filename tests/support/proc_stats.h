// SPDX-License-Identifier: MIT
// What a process holds, from /proc: for the leak checks of the cycle tests.
#ifndef MORI_TESTS_SUPPORT_PROC_STATS_H
#define MORI_TESTS_SUPPORT_PROC_STATS_H

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

namespace mori_test {

inline int CountFds() {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

inline int CountMappings() {
  std::ifstream maps("/proc/self/maps");
  return (int)std::count(std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>(), '\n');
}

// Mappings whose line mentions `what` (mori's memfd or /dev/shm/mori.* objects).
inline int CountMappingsOf(const std::string &what) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find(what) != std::string::npos;
  return n;
}

inline long ResidentKiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace mori_test

#endif
