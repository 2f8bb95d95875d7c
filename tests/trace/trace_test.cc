// SPDX-License-Identifier: MIT
// MORI_TRACE=file:PATH in CPU ranks: every rank writes one Chrome/Perfetto
// trace that is valid JSON, holds complete ("X") events with the fields the
// viewers need, the events of the calls made with plausible arguments, and
// properly nested intervals (a call inside another lies within it). Tracing
// off writes nothing; a value mori does not know fails naming it; the
// in-memory ring keeps the newest events and says how many it dropped.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/trace.h"
#include "mori/collectives.h"
#include "mori/window_ops.h"
#include "tests/support/world.h"
#include "tests/trace/json.h"

using mori_test::Json;
using mori_test::TestRanks;
using mori_test::World;

namespace {

std::string TempDir(const std::string &name) {
  const char *base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0700);
  return dir;
}

std::vector<std::string> Files(const std::string &dir) {
  std::vector<std::string> out;
  DIR *d = opendir(dir.c_str());
  if (!d) return out;
  while (struct dirent *e = readdir(d))
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Read(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// What each rank does while traced: a window made, a barrier, the window
// destroyed, one all-reduce; then mori_finalize writes the file.
void TracedWork(int rank, int size) {
  {
    World w;
    ASSERT_TRUE(w.ok());
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    MORI_ASSERT_OK(mori_window_barrier(win, 0, 0, nullptr));
    MORI_ASSERT_OK(mori_window_destroy(win));
    MORI_ASSERT_OK(mori_mem_free(mem));
    mori_coll_t *coll = nullptr;
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 1 << 20;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    std::vector<float> in(256, (float)rank), out(256, -1.0f);
    MORI_ASSERT_OK(mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
    EXPECT_EQ(out[0], (float)(size * (size - 1) / 2));
    MORI_ASSERT_OK(mori_coll_destroy(coll));
  }
  MORI_ASSERT_OK(mori_finalize());
}

struct Event {
  std::string name;
  double ts, dur;
  int pid, tid;
  const Json *args;
};

// The X events of one rank's file, each checked for the fields viewers need.
std::vector<Event> CheckFile(const Json &doc, int rank, const std::string &where) {
  std::vector<Event> events;
  EXPECT_TRUE(doc.kind == Json::kObject) << where;
  EXPECT_TRUE(doc.Has("traceEvents")) << where;
  if (!doc.Has("traceEvents")) return events;
  const Json &list = doc["traceEvents"];
  EXPECT_EQ(list.kind, Json::kArray) << where;
  EXPECT_EQ(doc["otherData"]["rank"].number, rank) << where;
  EXPECT_EQ(doc["otherData"]["clock"].text, "CLOCK_MONOTONIC") << where;
  for (const Json &e : list.items) {
    EXPECT_EQ(e["ph"].kind, Json::kString) << where;
    if (e["ph"].text != "X") continue;
    for (const char *key : {"ts", "dur", "pid", "tid"}) {
      EXPECT_TRUE(e.Has(key) && e[key].kind == Json::kNumber) << where << ": " << key;
      if (!e.Has(key)) return events;
    }
    EXPECT_EQ(e["name"].kind, Json::kString) << where;
    EXPECT_EQ(e["args"].kind, Json::kObject) << where;
    EXPECT_GE(e["dur"].number, 0) << where;
    EXPECT_GT(e["ts"].number, 0) << where;
    EXPECT_EQ(e["pid"].number, rank) << where << ": pid is the rank";
    events.push_back({e["name"].text, e["ts"].number, e["dur"].number, (int)e["pid"].number, (int)e["tid"].number,
                      &e["args"]});
  }
  return events;
}

const Event *Find(const std::vector<Event> &events, const std::string &name) {
  for (const Event &e : events)
    if (e.name == name) return &e;
  return nullptr;
}

bool Within(const Event &inner, const Event &outer) {
  const double slack = 0.0005;  // the files' resolution: 1 ns
  return inner.tid == outer.tid && inner.ts + slack >= outer.ts && inner.ts + inner.dur <= outer.ts + outer.dur + slack;
}

TEST(TraceFile, EveryRankWritesOneWellFormedTraceOfItsCalls) {
  std::string dir = TempDir("traces");
  for (const std::string &f : Files(dir)) unlink((dir + "/" + f).c_str());
  setenv("MORI_TRACE", ("file:" + dir + "/trace-%r.json").c_str(), 1);
  EXPECT_RANKS_PASS(TestRanks(), TracedWork);
  unsetenv("MORI_TRACE");

  std::vector<std::string> expected;
  for (int r = 0; r < TestRanks(); r++) expected.push_back("trace-" + std::to_string(r) + ".json");
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(Files(dir), expected) << "one file per rank, nothing else (no temporary files left)";

  for (int r = 0; r < TestRanks(); r++) {
    std::string path = dir + "/trace-" + std::to_string(r) + ".json";
    Json doc;
    try {
      doc = Json::Parse(Read(path));
    } catch (const std::exception &e) {
      FAIL() << path << ": " << e.what();
    }
    std::vector<Event> events = CheckFile(doc, r, path);
    for (const char *name : {"comm_create", "comm_allgather", "agree", "mem_alloc", "window_create", "window_barrier",
                             "window_destroy", "mem_free", "coll_create", "all_reduce", "comm_destroy"})
      EXPECT_TRUE(Find(events, name)) << path << " lacks " << name;

    const Event *alloc = Find(events, "mem_alloc");
    if (alloc) {
      EXPECT_EQ((*alloc->args)["bytes"].number, 4096) << path;
    }
    const Event *reduce = Find(events, "all_reduce");
    if (reduce) {
      EXPECT_EQ((*reduce->args)["count"].number, 256) << path;
    }
    const Event *window = Find(events, "window_create");
    if (window) {
      EXPECT_EQ((*window->args)["ranks"].number, TestRanks()) << path;
    }

    // The window's rendezvous is an agreement step inside window_create.
    bool rendezvous_inside = false;
    for (const Event &e : events)
      if (e.name == "agree" && (*e.args)["step"].text == "rendezvous" && window && Within(e, *window))
        rendezvous_inside = true;
    EXPECT_TRUE(rendezvous_inside) << path << ": no agree(step=rendezvous) within window_create";

    // Intervals of one thread nest or are disjoint (scoped events).
    for (const Event &a : events)
      for (const Event &b : events) {
        if (&a == &b || a.tid != b.tid) continue;
        bool disjoint = a.ts + a.dur <= b.ts + 0.0005 || b.ts + b.dur <= a.ts + 0.0005;
        EXPECT_TRUE(disjoint || Within(a, b) || Within(b, a))
            << path << ": " << a.name << " [" << a.ts << ", +" << a.dur << "] and " << b.name << " [" << b.ts << ", +"
            << b.dur << "] overlap without nesting";
      }
  }
}

TEST(TraceFile, OffWritesNothing) {
  std::string dir = TempDir("off");
  unsetenv("MORI_TRACE");
  char here[4096];
  ASSERT_TRUE(getcwd(here, sizeof(here)));
  ASSERT_EQ(chdir(dir.c_str()), 0);  // a relative path would land here
  EXPECT_RANKS_PASS(TestRanks(), [&](int rank, int size) {
    TracedWork(rank, size);
    EXPECT_EQ(mori_trace_enabled(), 0u);
    EXPECT_STREQ(mori_trace_file_path(), "");
  });
  ASSERT_EQ(chdir(here), 0);
  EXPECT_EQ(Files(dir), std::vector<std::string>{});
}

TEST(TraceConfig, AnUnknownValueFailsCommCreationNamingIt) {
  setenv("MORI_TRACE", "file:/dev/null,nvtxx", 1);
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_TRUE(b);
    static const mori_handle_ops_t *const handles[] = {&mori_handle_posix_fd_ops};
    static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = b;
    attr.handles = handles;
    attr.num_handles = 1;
    attr.transports = transports;
    attr.num_transports = 1;
    mori_comm_t *comm = nullptr;
    EXPECT_EQ(mori_comm_create(&attr, &comm), MORI_EINVAL);
    EXPECT_EQ(comm, nullptr);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("MORI_TRACE"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'nvtxx'"), std::string::npos) << msg;
    mori_bootstrap_destroy(b);
  });
  unsetenv("MORI_TRACE");
}

TEST(TraceConfig, ParseAcceptsTheDocumentedValuesOnly) {
  unsigned sinks = 0;
  char path[64];
  EXPECT_EQ(mori_trace_parse("", &sinks, path, sizeof(path)), 0);
  EXPECT_EQ(sinks, 0u);
  EXPECT_EQ(mori_trace_parse("nvtx", &sinks, path, sizeof(path)), 0);
  EXPECT_EQ(sinks, (unsigned)MORI_TRACE_NVTX);
  EXPECT_EQ(mori_trace_parse("nvtx,file:/x/t-%r.json", &sinks, path, sizeof(path)), 0);
  EXPECT_EQ(sinks, (unsigned)(MORI_TRACE_NVTX | MORI_TRACE_FILE));
  EXPECT_STREQ(path, "/x/t-%r.json");
  for (const char *bad : {"NVTX2", "file:", "nvtx,perfetto", "files:/x"}) {
    EXPECT_EQ(mori_trace_parse(bad, &sinks, path, sizeof(path)), MORI_EINVAL) << bad;
    EXPECT_NE(std::string(mori_last_error()).find(std::string("MORI_TRACE=") + bad), std::string::npos)
        << mori_last_error();
  }
  EXPECT_EQ(mori_trace_parse("file:/a/very/long/path/that/does/not/fit/in/sixty/four/characters/x.json", &sinks, path,
                             sizeof(path)),
            MORI_EINVAL);
}

TEST(TraceConfig, AFileThatCannotBeWrittenFailsAtOnceNamingIt) {
  EXPECT_EQ(mori_trace_configure("file:/no-such-folder-for-mori/t-%r.json", 3, 4), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("/no-such-folder-for-mori/t-3.json"), std::string::npos)
      << mori_last_error();
  EXPECT_EQ(mori_trace_enabled(), 0u);
}

TEST(TraceConfig, NvtxOnTheHostPlatformIsANoOp) {
  ASSERT_EQ(mori_trace_configure("nvtx", 0, 0), 0) << mori_last_error();
  EXPECT_EQ(mori_trace_enabled(), 0u);
  ASSERT_EQ(mori_trace_configure("", 0, 0), 0);
}

void Record(const char *name, long long i) {
  mori_trace_scope_t s = {};
  mori_trace_arg_t arg = {"i", i, nullptr};
  mori_trace_begin(&s, name, &arg, 1);
  mori_trace_end(&s);
}

TEST(TraceRing, KeepsTheNewestEventsAndCountsTheDropped) {
  std::string dir = TempDir("ring");
  ASSERT_EQ(mori_trace_configure(("file:" + dir + "/ring-%r-%p.json").c_str(), 7, 4), 0) << mori_last_error();
  std::string path = mori_trace_file_path();
  EXPECT_EQ(path, dir + "/ring-7-" + std::to_string(getpid()) + ".json");
  for (int i = 0; i < 10; i++) Record("ev", i);
  ASSERT_EQ(mori_trace_flush(), 0) << mori_last_error();
  Json doc = Json::Parse(Read(path));
  std::vector<Event> events = CheckFile(doc, 7, path);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].name, "mori_trace_dropped");
  EXPECT_EQ((*events[0].args)["dropped"].number, 6);
  for (int k = 1; k < 5; k++) {
    EXPECT_EQ(events[k].name, "ev");
    EXPECT_EQ((*events[k].args)["i"].number, 5 + k) << "the newest four, oldest first";
  }
  EXPECT_EQ(doc["otherData"]["dropped_events"].number, 6);
  ASSERT_EQ(mori_trace_configure("", 0, 0), 0);
  EXPECT_EQ(mori_trace_enabled(), 0u);
}

TEST(TraceRing, TextArgumentsAreEscaped) {
  std::string dir = TempDir("escape");
  ASSERT_EQ(mori_trace_configure(("file:" + dir + "/e.json").c_str(), 0, 8), 0) << mori_last_error();
  mori_trace_scope_t s = {};
  mori_trace_arg_t args[2] = {{"step", 0, "a \"quoted\"\\step\n"}, {"n", -3, nullptr}};
  mori_trace_begin(&s, "odd", args, 2);
  mori_trace_end(&s);
  ASSERT_EQ(mori_trace_flush(), 0) << mori_last_error();
  Json doc = Json::Parse(Read(dir + "/e.json"));
  std::vector<Event> events = CheckFile(doc, 0, "e.json");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ((*events[0].args)["step"].text, "a \"quoted\"\\step\n");
  EXPECT_EQ((*events[0].args)["n"].number, -3);
  ASSERT_EQ(mori_trace_configure("", 0, 0), 0);
}

}  // namespace
