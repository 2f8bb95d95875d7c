// SPDX-License-Identifier: MIT
// The init thread's CPU affinity, computed from fake sysfs trees: the
// GPU's local CPUs within the allowed set, one disjoint slice of whole
// physical cores per GPU of a NUMA node (SMT siblings together), the whole
// node when there is one GPU, fewer cores than GPUs, or no split asked for.
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "shmem/internal/cpu_affinity.h"
#include "tests/support/harness.h"

namespace {

// A sysfs tree in a fresh directory: CPUs with their SMT siblings, GPUs
// (PCI devices) with their local CPUs and NUMA node.
class FakeSysfs {
 public:
  FakeSysfs() {
    const char *tmp = getenv("TEST_TMPDIR");
    char templ[512];
    snprintf(templ, sizeof(templ), "%s/sysfs_XXXXXX", tmp ? tmp : "/tmp");
    root_ = mkdtemp(templ);
  }
  const std::string &root() const { return root_; }

  // `cores` physical cores numbered from `first`; core c has CPUs c and
  // c + smt_stride when smt_stride > 0 (Linux's usual SMT numbering).
  void AddCores(int first, int cores, int smt_stride) {
    for (int c = first; c < first + cores; c++) {
      std::string siblings = smt_stride ? std::to_string(c) + "," + std::to_string(c + smt_stride) : std::to_string(c);
      Write("devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list", siblings);
      if (smt_stride)
        Write("devices/system/cpu/cpu" + std::to_string(c + smt_stride) + "/topology/thread_siblings_list", siblings);
    }
  }
  void AddGpu(const std::string &pci, const std::string &cpulist, int node) {
    Write("bus/pci/devices/" + pci + "/local_cpulist", cpulist);
    Write("bus/pci/devices/" + pci + "/numa_node", std::to_string(node));
  }

 private:
  void Write(const std::string &rel, const std::string &text) {
    std::string path = root_ + "/" + rel;
    for (size_t at = root_.size() + 1; (at = path.find('/', at)) != std::string::npos; at++)
      mkdir(path.substr(0, at).c_str(), 0755);
    std::ofstream(path) << text << "\n";
  }
  std::string root_;
};

cpu_set_t Cpus(const std::string &list) {
  cpu_set_t set;
  EXPECT_EQ(mori_cpu_list_parse(list.c_str(), &set), 0) << list;
  return set;
}

std::string List(const cpu_set_t &set) {
  char text[512];
  mori_cpu_list_format(&set, text, sizeof(text));
  return text;
}

struct Result {
  int rc;
  std::string cpus, why;
};

Result Compute(const FakeSysfs &fs, const std::vector<std::string> &gpus, int gpu, const std::string &allowed,
               bool split = true) {
  std::vector<const char *> names;
  for (auto &g : gpus) names.push_back(g.c_str());
  cpu_set_t allow = Cpus(allowed), out;
  mori_cpu_affinity_input_t in = {fs.root().c_str(), names.data(), (int)names.size(), gpu, &allow, split};
  char why[512];
  Result r;
  r.rc = mori_cpu_affinity_compute(&in, &out, why, sizeof(why));
  r.cpus = List(out);
  r.why = r.rc ? mori_last_error() : why;
  return r;
}

// Two NUMA nodes of 8 two-thread cores: node 0 has CPUs 0-7 and their
// siblings 16-23, node 1 CPUs 8-15 and 24-31; four GPUs on each node.
FakeSysfs TwoNodes() {
  FakeSysfs fs;
  fs.AddCores(0, 16, 16);
  for (int g = 0; g < 4; g++) fs.AddGpu("0000:1" + std::to_string(g) + ":00.0", "0-7,16-23", 0);
  for (int g = 0; g < 4; g++) fs.AddGpu("0000:9" + std::to_string(g) + ":00.0", "8-15,24-31", 1);
  return fs;
}

const std::vector<std::string> kEightGpus = {"0000:10:00.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0",
                                             "0000:90:00.0", "0000:91:00.0", "0000:92:00.0", "0000:93:00.0"};

TEST(CpuAffinity, CpuListsParseAndFormatLikeSysfs) {
  EXPECT_EQ(List(Cpus("0-3,8,10-11\n")), "0-3,8,10-11");
  EXPECT_EQ(List(Cpus("5")), "5");
  cpu_set_t set;
  EXPECT_EQ(mori_cpu_list_parse("3-1", &set), MORI_EINVAL);
  EXPECT_EQ(mori_cpu_list_parse("x", &set), MORI_EINVAL);
  EXPECT_EQ(mori_cpu_list_parse("1,,", &set), MORI_EINVAL);
}

TEST(CpuAffinity, EachGpuOfANodeGetsADisjointSliceOfWholeCores) {
  FakeSysfs fs = TwoNodes();
  std::string all = "0-31";
  std::vector<std::string> want = {"0-1,16-17", "2-3,18-19", "4-5,20-21", "6-7,22-23",
                                   "8-9,24-25", "10-11,26-27", "12-13,28-29", "14-15,30-31"};
  for (int g = 0; g < 8; g++) {
    Result r = Compute(fs, kEightGpus, g, all);
    ASSERT_EQ(r.rc, 0) << r.why;
    EXPECT_EQ(r.cpus, want[g]) << "GPU " << g << ": " << r.why;
  }
  Result r = Compute(fs, kEightGpus, 5, all);
  EXPECT_NE(r.why.find("slice 1 of 4, cores 2-3 of 8"), std::string::npos) << r.why;
}

TEST(CpuAffinity, SlicesFollowPciOrderNotTheRuntimesDeviceOrder) {
  FakeSysfs fs = TwoNodes();
  // The runtime lists node 0's GPUs in reverse: slices still go by address.
  std::vector<std::string> reversed = {"0000:13:00.0", "0000:12:00.0", "0000:11:00.0", "0000:10:00.0"};
  EXPECT_EQ(Compute(fs, reversed, 0, "0-31").cpus, "6-7,22-23");
  EXPECT_EQ(Compute(fs, reversed, 3, "0-31").cpus, "0-1,16-17");
}

TEST(CpuAffinity, NoSplitOrOneGpuOrTooFewCoresBindsTheWholeNode) {
  FakeSysfs fs = TwoNodes();
  Result no_split = Compute(fs, kEightGpus, 1, "0-31", /*split=*/false);
  EXPECT_EQ(no_split.cpus, "0-7,16-23");
  EXPECT_NE(no_split.why.find("MORI_CPU_AFFINITY_NO_SPLIT"), std::string::npos) << no_split.why;
  // The process sees one GPU of the node (CUDA_VISIBLE_DEVICES): the whole node.
  EXPECT_EQ(Compute(fs, {"0000:12:00.0"}, 0, "0-31").cpus, "0-7,16-23");
  // Three cores allowed for four GPUs: no slice, the node's allowed CPUs.
  Result few = Compute(fs, kEightGpus, 2, "0-2,16-18");
  EXPECT_EQ(few.cpus, "0-2,16-18");
  EXPECT_NE(few.why.find("fewer cores than GPUs"), std::string::npos) << few.why;
}

TEST(CpuAffinity, TheAllowedSetIsRespectedAndSiblingsStayTogether) {
  FakeSysfs fs = TwoNodes();
  // A cpuset of four cores (both threads): one core per GPU.
  EXPECT_EQ(Compute(fs, kEightGpus, 0, "0-3,16-19").cpus, "0,16");
  EXPECT_EQ(Compute(fs, kEightGpus, 3, "0-3,16-19").cpus, "3,19");
  // Only first threads allowed: cores are still whole cores, one thread each.
  EXPECT_EQ(Compute(fs, kEightGpus, 1, "0-15").cpus, "2-3");
  // Uneven: 6 cores for 4 GPUs -> 1, 2, 1, 2 cores.
  EXPECT_EQ(Compute(fs, kEightGpus, 0, "0-5,16-21").cpus, "0,16");
  EXPECT_EQ(Compute(fs, kEightGpus, 1, "0-5,16-21").cpus, "1-2,17-18");
  EXPECT_EQ(Compute(fs, kEightGpus, 2, "0-5,16-21").cpus, "3,19");
  EXPECT_EQ(Compute(fs, kEightGpus, 3, "0-5,16-21").cpus, "4-5,20-21");
}

TEST(CpuAffinity, WithoutNumaNodesGpusWithTheSameLocalCpusShareANode) {
  FakeSysfs fs;
  fs.AddCores(0, 4, 0);  // no SMT
  fs.AddGpu("0000:01:00.0", "0-3", -1);
  fs.AddGpu("0000:02:00.0", "0-3", -1);
  EXPECT_EQ(Compute(fs, {"0000:01:00.0", "0000:02:00.0"}, 1, "0-3").cpus, "2-3");
}

TEST(CpuAffinity, MissingSysfsOrNoAllowedLocalCpuIsAClearError) {
  FakeSysfs fs = TwoNodes();
  Result missing = Compute(fs, {"0000:ff:00.0"}, 0, "0-31");
  EXPECT_EQ(missing.rc, MORI_ENOENT);
  EXPECT_NE(missing.why.find("0000:ff:00.0/local_cpulist"), std::string::npos) << missing.why;
  Result elsewhere = Compute(fs, kEightGpus, 0, "8-15");
  EXPECT_EQ(elsewhere.rc, MORI_EINVAL);
  EXPECT_NE(elsewhere.why.find("none of GPU 0000:10:00.0's CPUs (0-7,16-23) is in this thread's set (8-15)"),
            std::string::npos)
      << elsewhere.why;
}

}  // namespace
