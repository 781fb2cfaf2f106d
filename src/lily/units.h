// Sizes as people read them, for messages and tables.
#pragma once

#include <cstdio>
#include <string>

namespace lily {

// "512 B", "1.50 KiB", "20.3 MiB": binary units, `decimals` places past bytes.
inline std::string human_bytes(double bytes, int decimals = 2) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %s", u == 0 ? 0 : decimals, bytes, units[u]);
  return buf;
}

}  // namespace lily
