#include "lily/io/bounded_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lily/error.h"

namespace lily {

std::string read_regular_file(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw Error(path + " is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                " such a file may have");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t off = 0;
  while (off < out.size()) {
    const ssize_t n = ::read(fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;  // shrank while read
    off += static_cast<size_t>(n);
  }
  out.resize(off);
  return out;
}

void check_json_depth(std::string_view text, const std::string& source, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw Error(source + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

namespace {
template <class Json>
Json parse_checked(std::string_view text, const std::string& source, int max_depth) {
  check_json_depth(text, source, max_depth);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed JSON: " + e.what());
  }
}
}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth) {
  return parse_checked<nlohmann::json>(text, source, max_depth);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source, int max_depth) {
  return parse_checked<nlohmann::ordered_json>(text, source, max_depth);
}

}  // namespace lily
