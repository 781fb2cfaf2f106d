#include "lily/net/url.h"

#include <gtest/gtest.h>

#include "lily/error.h"

namespace lily::net {
namespace {

TEST(Url, ParsesSchemeHostPortAndTarget) {
  Url u = Url::parse("https://huggingface.co", "x");
  EXPECT_TRUE(u.https);
  EXPECT_EQ(u.host, "huggingface.co");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.target, "/");
  u = Url::parse("http://127.0.0.1:8080/api/x?q=1#frag", "x");
  EXPECT_FALSE(u.https);
  EXPECT_EQ(u.authority(), "127.0.0.1:8080");
  EXPECT_EQ(u.target, "/api/x?q=1");
  u = Url::parse("http://[::1]:9/v1", "x");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.origin(), "http://[::1]:9");
}

TEST(Url, RefusesWhatIsNotAnHttpUrl) {
  for (const char* bad : {"ftp://x", "x.com", "http://", "http://user:pw@host/", "http://host:0/", "http://host:99999/",
                          "http://host:12ab/", "http://[::1/", "http://host/a b", "http://host/a\r\nX: y"})
    EXPECT_THROW(Url::parse(bad, "the test URL"), Error) << bad;
  try {
    Url::parse("ftp://x", "the hub endpoint (HF_ENDPOINT)");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the hub endpoint (HF_ENDPOINT) must start with http://"), std::string::npos);
  }
}

TEST(Url, ResolvesRedirects) {
  const Url base = Url::parse("http://hub:80/org/name/resolve/main/dir/file.bin?x=1", "x");
  EXPECT_EQ(base.resolve("https://cdn.example/blob?sig=1").origin(), "https://cdn.example:443");
  EXPECT_EQ(base.resolve("/api/other").target, "/api/other");
  EXPECT_EQ(base.resolve("other.bin").target, "/org/name/resolve/main/dir/other.bin");
  EXPECT_EQ(base.resolve("//mirror:81/x").authority(), "mirror:81");
  EXPECT_THROW(base.resolve("file:///etc/passwd").host, Error);
}

TEST(Url, PercentEncodes) {
  EXPECT_EQ(percent_encode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(percent_encode("a dir/Q4_K_M.gguf", true), "a%20dir/Q4_K_M.gguf");
}

}  // namespace
}  // namespace lily::net
