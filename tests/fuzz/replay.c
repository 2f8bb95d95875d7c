// SPDX-License-Identifier: MIT
/* Runs a libFuzzer target's entry point over every file of the corpus
 * directories named on the command line, so that `bazel test` (plain and
 * under ASan/UBSan) replays the seeds and any reproducer added to them
 * without clang's libFuzzer. tools/fuzz.sh does the fuzzing itself. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  uint8_t *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  if (!buf) return -1;
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0;
  for (int i = 1; i < argc; i++) {
    DIR *d = opendir(argv[i]);
    if (!d) {
      fprintf(stderr, "replay: cannot open %s\n", argv[i]);
      return 1;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
      if (replay_file(path) != 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        closedir(d);
        return 1;
      }
      files++;
    }
    closedir(d);
  }
  printf("replay: %d inputs, no failure\n", files);
  return files > 0 ? 0 : 1;
}
