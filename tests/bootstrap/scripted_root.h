// A rank 0 that follows a script instead of the bootstrap's logic: for tests
// of what a rank does when rank 0 misbehaves.
#ifndef MORI_TESTS_BOOTSTRAP_SCRIPTED_ROOT_H
#define MORI_TESTS_BOOTSTRAP_SCRIPTED_ROOT_H

namespace mori_test {

// Accepts one rank on listen_fd, goes through start-up as far as a real rank
// 0 would, then sends an ABORT carrying `code` and `text` instead of READY.
// True when the script ran to its end.
bool ScriptedRootAborts(int listen_fd, int size, int code, const char *text);

}  // namespace mori_test

#endif
