#include "lily/io/mapped_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "support/test_support.h"

namespace lily {
namespace {

using test::TempDir;

// A file of `bytes` whose every page holds its own index, so a read of the
// mapping shows the bytes came through.
std::string write_pages(const TempDir& dir, size_t bytes) {
  const std::string path = dir.str() + "/weights.bin";
  std::ofstream out(path, std::ios::binary);
  std::string page(4096, '\0');
  for (size_t p = 0; p * 4096 < bytes; ++p) {
    page[0] = static_cast<char>(p & 0xff);
    out.write(page.data(), static_cast<std::streamsize>(std::min<size_t>(4096, bytes - p * 4096)));
  }
  return path;
}

TEST(MappedFile, ReadsAheadTheWholeFileInTheBackground) {
  TempDir dir;
  const size_t bytes = (size_t{40} << 20) + 123;  // more than two chunks, not a whole page at the end
  MappedFile f(write_pages(dir, bytes));
  MappedFile* files[] = {&f};
  ASSERT_TRUE(read_ahead_if_it_fits(files));
  f.read_ahead();  // a second call while it runs changes nothing
  for (int i = 0; i < 3000 && !f.read_ahead_done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(f.read_ahead_done());
  EXPECT_EQ(f.data()[4096 * 300], static_cast<uint8_t>(300 & 0xff));
}

TEST(MappedFile, ClosingStopsTheReadingAhead) {
  TempDir dir;
  const std::string path = write_pages(dir, size_t{64} << 20);
  for (int i = 0; i < 5; ++i) {  // closed at once, and closed part way: neither touches the unmapped file
    MappedFile f(path);
    f.read_ahead();
    if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(MappedFile, ReadsNothingAheadWhenTurnedOffOrTooBig) {
  TempDir dir;
  MappedFile small(write_pages(dir, 8192));
  MappedFile* one[] = {&small};
  set_read_ahead(false);
  EXPECT_FALSE(read_ahead_if_it_fits(one));
  set_read_ahead(true);
  // a model of 1 TiB (a sparse file of 1 GiB as 1024 parts): more than
  // memory holds, so none of it is read
  const std::string big = dir.str() + "/big.bin";
  std::ofstream(big).put('x');
  std::filesystem::resize_file(big, size_t{1} << 30);
  MappedFile f(big);
  std::vector<MappedFile*> files(1024, &f);
  files.push_back(&small);
  EXPECT_FALSE(read_ahead_if_it_fits(files));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(f.read_ahead_done());
  EXPECT_FALSE(small.read_ahead_done());
}

}  // namespace
}  // namespace lily
