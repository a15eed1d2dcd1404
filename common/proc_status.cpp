#include "common/proc_status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cae {

uint64_t proc_status_bytes(const char* field, const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  const size_t name_len = strlen(field);
  char line[256];
  uint64_t bytes = 0;
  while (fgets(line, sizeof line, f)) {
    // "VmSize:\t  123456 kB": the name, a colon, the number in kB.
    if (strncmp(line, field, name_len) != 0 || line[name_len] != ':') continue;
    char* end = nullptr;
    const unsigned long long kb = strtoull(line + name_len + 1, &end, 10);
    if (end != line + name_len + 1 && strstr(end, "kB")) bytes = uint64_t(kb) * 1024;
    break;
  }
  fclose(f);
  return bytes;
}

}  // namespace cae
