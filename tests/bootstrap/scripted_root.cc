#include "tests/bootstrap/scripted_root.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace mori_test {

namespace {
// Protocol 1: a header {magic, op, rank, arg, seq, bytes} in host order.
struct Header {
  uint32_t magic, op;
  int32_t rank, arg;
  uint64_t seq, bytes;
};
constexpr uint32_t kMagic = 0x6d6f7269, kHello = 1, kAbort = 7;

bool RecvAll(int fd, void *buf, size_t len) {
  char *p = static_cast<char *>(buf);
  while (len) {
    ssize_t n = recv(fd, p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}
}  // namespace

bool ScriptedRootAborts(int listen_fd, int size, int code, const char *text) {
  int fd = accept(listen_fd, nullptr, nullptr);
  if (fd < 0) return false;
  Header h;
  if (!RecvAll(fd, &h, sizeof(h)) || h.magic != kMagic || h.op != kHello) return false;
  Header abort = {kMagic, kAbort, 0, code, 0, strlen(text) + 1};
  bool ok = send(fd, &abort, sizeof(abort), MSG_NOSIGNAL) == sizeof(abort) &&
            send(fd, text, abort.bytes, MSG_NOSIGNAL) == (ssize_t)abort.bytes;
  char c;
  recv(fd, &c, 1, 0);  // until the rank closes
  close(fd);
  return ok;
}

}  // namespace mori_test
