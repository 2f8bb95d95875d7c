// SPDX-License-Identifier: MIT
// Raw TCP helpers for tests that play a process outside the job: a stranger
// on the bootstrap port, a silent client, a listener that never accepts.
#ifndef MORI_TESTS_SUPPORT_SOCKETS_H
#define MORI_TESTS_SUPPORT_SOCKETS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace mori_test {

// Whether a loopback TCP port can be bound right now.
inline bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  bool ok = bind(fd, (sockaddr *)&sa, sizeof(sa)) == 0;
  close(fd);
  return ok;
}

// A loopback port nobody listens on right now, below the kernel's
// ephemeral range (32768 and up by default): the listeners and connections
// of other tests running meanwhile (the bootstrap's links listen on
// ephemeral ports) never take it; only another explicit choice could.
inline int FreePort() {
  static unsigned next = (unsigned)getpid() * 7919u;
  for (int tries = 0; tries < 4096; tries++) {
    int port = 20000 + (int)(next++ % 12000u);
    if (PortFree(port)) return port;
  }
  return 0;
}

// A listening loopback socket with the given backlog; its port in *port.
inline int ListenLoopback(int backlog, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (bind(fd, (sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, (sockaddr *)&sa, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

// Connects to "a.b.c.d:port" (IPv4 only); -1 when refused or unreachable.
inline int ConnectRaw(const std::string &address) {
  size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)std::atoi(address.c_str() + colon + 1));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, (sockaddr *)&sa, sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the peer sent until it closed the connection or went quiet for
// quiet_ms.
inline std::string ReadUntilQuiet(int fd, int quiet_ms) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, quiet_ms) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  return out;
}

}  // namespace mori_test

#endif
