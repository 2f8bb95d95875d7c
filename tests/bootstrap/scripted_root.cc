// SPDX-License-Identifier: MIT
#include "tests/bootstrap/scripted_root.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bootstrap/internal/handshake.h"
#include "core/bootstrap/internal/wire.h"

namespace mori_test {

namespace {

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

bool SendAll(int fd, const std::vector<uint8_t> &bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == (ssize_t)bytes.size();
}

std::vector<uint8_t> Frame(const mori_wire_header_t &h, const void *payload, size_t len) {
  std::vector<uint8_t> out(MORI_WIRE_HEADER_BYTES);
  mori_wire_encode(&h, out.data());
  const uint8_t *p = static_cast<const uint8_t *>(payload);
  out.insert(out.end(), p, p + len);
  return out;
}

// Reads HELLO or AUTH: the header and its 32-byte body.
bool RecvStartup(int fd, uint32_t op, mori_wire_header_t *h, uint8_t body[32]) {
  uint8_t header[MORI_WIRE_HEADER_BYTES];
  char why[128];
  return RecvAll(fd, header, sizeof(header)) && mori_wire_decode(header, h, why, sizeof(why)) == 0 && h->op == op &&
         h->bytes == 32 && RecvAll(fd, body, 32);
}

}  // namespace

bool ScriptedRootRefuses(int listen_fd, int size, const std::string &secret, RootRefuses when, int code,
                         const char *text) {
  int fd = accept(listen_fd, nullptr, nullptr);
  if (fd < 0) return false;
  mori_wire_header_t hello, auth;
  uint8_t nonce_rank[32], proof[32];
  bool ok = RecvStartup(fd, MORI_WIRE_HELLO, &hello, nonce_rank);
  size_t text_len = strlen(text) + 1;
  if (ok && when == RootRefuses::kSpeaksProtocol3) {
    // What a rank 0 of the previous protocol answers: a header whose version
    // field (bytes 4-5, little-endian) says 3, and a body of 64 bytes.
    uint8_t body[64] = {};
    mori_wire_header_t challenge = {MORI_WIRE_CHALLENGE, 0, size, 0, sizeof(body)};
    std::vector<uint8_t> frame = Frame(challenge, body, sizeof(body));
    frame[4] = 3;
    frame[5] = 0;
    ok = SendAll(fd, frame);
  } else if (ok && when == RootRefuses::kAtHello) {
    mori_wire_header_t reject = {MORI_WIRE_REJECT, 0, code, 0, text_len};
    ok = SendAll(fd, Frame(reject, text, text_len));
  } else if (ok) {
    uint8_t key[MORI_HS_KEY_BYTES], body[64];
    mori_hs_job_key(secret.data(), secret.size(), key);
    memset(body, 0x5a, 32);  // rank 0's nonce
    mori_hs_proof(key, MORI_HS_ROOT, size, hello.rank, nonce_rank, body, body + 32);
    mori_wire_header_t challenge = {MORI_WIRE_CHALLENGE, 0, size, 0, sizeof(body)};
    ok = SendAll(fd, Frame(challenge, body, sizeof(body))) && RecvStartup(fd, MORI_WIRE_AUTH, &auth, proof);
    uint8_t to_root[MORI_HS_KEY_BYTES], from_root[MORI_HS_KEY_BYTES];
    mori_hs_session_keys(key, size, hello.rank, nonce_rank, body, to_root, from_root);
    // The ABORT, sealed as rank 0's first frame on this connection: header,
    // header MAC, text, frame MAC.
    mori_wire_header_t abort = {MORI_WIRE_ABORT, 0, code, 0, text_len};
    std::vector<uint8_t> frame(MORI_WIRE_SEALED_HEADER_BYTES);
    mori_hs_seal_header(from_root, 0, &abort, frame.data());
    const uint8_t *t = reinterpret_cast<const uint8_t *>(text);
    frame.insert(frame.end(), t, t + text_len);
    uint8_t digest[MORI_SHA256_BYTES], tag[MORI_WIRE_MAC_BYTES];
    mori_hs_payload_digest(t, text_len, digest);
    mori_hs_frame_mac(from_root, 0, frame.data(), digest, tag);
    frame.insert(frame.end(), tag, tag + sizeof(tag));
    ok = ok && SendAll(fd, frame);
  }
  char c;
  recv(fd, &c, 1, 0);  // until the rank closes
  close(fd);
  return ok;
}

}  // namespace mori_test
