// http:// and https:// URLs as the outbound client uses them: scheme, host,
// port and the request target (path and query). Nothing else is accepted:
// no credentials in the authority, no other schemes.
#pragma once

#include <string>

namespace lily::net {

struct Url {
  bool https = false;
  std::string host;    // without brackets for IPv6
  int port = 0;
  std::string target;  // path and query, always starting with '/'

  // Throws lily::Error starting with `what` ("the cloud tier's baseUrl") when
  // `text` is not an http(s) URL with a host and a valid port.
  static Url parse(const std::string& text, const std::string& what);

  // host:port, with brackets around an IPv6 host (the Host header, logs).
  std::string authority() const;
  // scheme://authority
  std::string origin() const;
  // The URL a redirect's Location names: absolute, or relative to this one.
  // Throws lily::Error when it is not an http(s) URL.
  Url resolve(const std::string& location) const;
};

// Percent-encodes everything but unreserved characters; '/' stays when
// `keep_slash` (a file path inside a repository).
std::string percent_encode(const std::string& text, bool keep_slash);

}  // namespace lily::net
