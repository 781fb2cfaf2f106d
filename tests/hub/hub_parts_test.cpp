// The pieces of `lily pull` that need no network: the two hashes the hub
// names files by, the checks on what the hub lists, and the cache's names.
#include <gtest/gtest.h>

#include <string>

#include "lily/hub/digest.h"
#include "lily/hub/hub_client.h"
#include "lily/io/hf_cache.h"

namespace lily::hub {
namespace {

std::string sha256(const std::string& s) {
  Sha256 h;
  h.update(s);
  return h.hex();
}

std::string sha1(const std::string& s) {
  Sha1 h;
  h.update(s);
  return h.hex();
}

TEST(Digest, KnownVectors) {
  EXPECT_EQ(sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha1(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(sha1("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  // git hash-object of "hello\n": the blob header is hashed with the content.
  EXPECT_EQ(sha1(std::string("blob 6\0hello\n", 13)), "ce013625030ba8dba906f756967f9e9ca394464a");
}

TEST(Digest, FedInPiecesEqualsWhole) {
  std::string data(1'000'003, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 7));
  Sha256 a;
  Sha1 b;
  for (size_t at = 0, step = 1; at < data.size(); at += step, step = step * 3 % 997 + 1) {
    a.update(std::string_view(data).substr(at, step));
    b.update(std::string_view(data).substr(at, step));
  }
  EXPECT_EQ(a.hex(), sha256(data));
  EXPECT_EQ(b.hex(), sha1(data));
  // A million 'a's: the standard long vector.
  EXPECT_EQ(sha256(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha1(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(HubPaths, OnlyPathsInsideTheRepositoryAreSafe) {
  for (const char* ok : {"config.json", "a/b/c.safetensors", "Q4_K_M/model-00001-of-00002.gguf", "..hidden", "a..b"})
    EXPECT_TRUE(is_safe_repo_path(ok)) << ok;
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", "a\\b", "a\nb", "..", "."})
    EXPECT_FALSE(is_safe_repo_path(bad)) << bad;
  EXPECT_FALSE(is_safe_repo_path(std::string(1025, 'a')));
}

TEST(HfCache, RepoIdsAndFolders) {
  for (const char* ok : {"Qwen/Qwen3.6-35B-A3B", "unsloth/Qwen3.6-35B-A3B-GGUF", "mlx-community/Qwen3.6_35B.4bit", "a/b"})
    EXPECT_TRUE(hf_cache::is_repo_id(ok)) << ok;
  for (const char* bad : {"Qwen", "/Qwen/x", "Qwen/", "a/b/c", "../x", "a/..", "a/b--c", "a/-b", "a/b.", "a b/c", "a/b?c"})
    EXPECT_FALSE(hf_cache::is_repo_id(bad)) << bad;
  EXPECT_EQ(hf_cache::repo_dir("/c", "Qwen/Qwen3.6-35B-A3B").string(), "/c/models--Qwen--Qwen3.6-35B-A3B");
}

}  // namespace
}  // namespace lily::hub
