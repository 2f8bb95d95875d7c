// SPDX-License-Identifier: MIT
// A rank 0 that follows a script instead of the bootstrap's logic: for tests
// of what a rank does when rank 0 misbehaves.
#ifndef MORI_TESTS_BOOTSTRAP_SCRIPTED_ROOT_H
#define MORI_TESTS_BOOTSTRAP_SCRIPTED_ROOT_H

#include <string>

namespace mori_test {

enum class RootRefuses {
  kAtHello,  // a REJECT in answer to the HELLO, before anyone proved anything
  kAtReady,  // the whole handshake with the job's secret, then an ABORT instead of READY
  kSpeaksProtocol3,  // answers the HELLO with a CHALLENGE of bootstrap protocol 3 (code and text unused)
};

// Accepts one rank of a job of `size` on listen_fd and refuses it as `when`
// says, with `code` and `text`. True when the script ran to its end.
bool ScriptedRootRefuses(int listen_fd, int size, const std::string &secret, RootRefuses when, int code,
                         const char *text);

}  // namespace mori_test

#endif
