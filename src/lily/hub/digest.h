// The two hashes the Hugging Face hub names its files by: SHA-256 of the
// content for LFS files, and git's blob SHA-1 ("blob <size>\0" + content)
// for the rest. Both stream, so a download is hashed as it arrives and a
// resumed one only rereads what is already on disk.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lily::hub {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  std::string hex();  // ends the hash

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

class Sha1 {
 public:
  Sha1();
  void update(std::string_view data);
  std::string hex();  // ends the hash

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 5> h_;
  std::array<uint8_t, 64> buf_{};
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

}  // namespace lily::hub
