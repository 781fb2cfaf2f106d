#include "lily/net/url.h"

#include <cctype>
#include <cstdlib>

#include "lily/error.h"

namespace lily::net {

Url Url::parse(const std::string& text, const std::string& what) {
  Url u;
  std::string rest;
  if (text.rfind("https://", 0) == 0) {
    u.https = true;
    rest = text.substr(8);
  } else if (text.rfind("http://", 0) == 0) {
    rest = text.substr(7);
  } else {
    throw Error(what + " must start with http:// or https:// (got '" + text + "')");
  }
  const size_t end = rest.find_first_of("/?#");
  const std::string authority = rest.substr(0, end);
  u.target = end == std::string::npos ? "/" : rest.substr(end);
  if (const size_t hash = u.target.find('#'); hash != std::string::npos) u.target.resize(hash);
  if (u.target.empty() || u.target[0] != '/') u.target = "/" + u.target;
  if (authority.find('@') != std::string::npos) throw Error(what + " must not hold credentials");
  u.port = u.https ? 443 : 80;
  std::string port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw Error(what + " has a malformed IPv6 address");
    u.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw Error(what + " has a malformed IPv6 address");
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (!port.empty()) {
    char* e = nullptr;
    const long p = std::strtol(port.c_str(), &e, 10);
    u.port = *e == '\0' ? static_cast<int>(p) : -1;
  }
  if (u.host.empty() || u.port <= 0 || u.port > 65535) throw Error(what + " has no valid host and port");
  for (char c : u.host)
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '\\') throw Error(what + " has an invalid host");
  for (char c : u.target)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) throw Error(what + " holds a space or a control character");
  return u;
}

std::string Url::authority() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Url::origin() const { return std::string(https ? "https://" : "http://") + authority(); }

Url Url::resolve(const std::string& location) const {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return parse(location, "a redirect");
  // Any other scheme ("file:", "ftp:") is refused, not read as a relative path.
  const size_t colon = location.find(':');
  if (colon != std::string::npos && colon > 0 && std::isalpha(static_cast<unsigned char>(location[0])) &&
      location.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") == colon)
    throw Error("a redirect to '" + location.substr(0, 64) + "' is not to an http(s) URL");
  if (location.rfind("//", 0) == 0) return parse((https ? "https:" : "http:") + location, "a redirect");
  if (!location.empty() && location[0] == '/') return parse(origin() + location, "a redirect");
  // Relative to the current path's folder.
  std::string base = target.substr(0, target.find('?'));
  base.resize(base.rfind('/') + 1);
  return parse(origin() + base + location, "a redirect");
}

std::string percent_encode(const std::string& text, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace lily::net
