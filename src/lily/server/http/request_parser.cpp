#include "lily/server/http/request_parser.h"

#include <algorithm>
#include <cctype>

namespace lily::http {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool is_token_char(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

ParseResult error(int status, std::string message) {
  ParseResult r;
  r.state = ParseResult::State::Error;
  r.status = status;
  r.message = std::move(message);
  return r;
}

}  // namespace

size_t find_head_end(std::string_view data, size_t from) {
  for (size_t i = from; i < data.size(); ++i) {
    if (data[i] != '\n') continue;
    if (i + 1 < data.size() && data[i + 1] == '\n') return i + 2;
    if (i + 2 < data.size() && data[i + 1] == '\r' && data[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

ParseResult parse_request(std::string_view data, const ParserLimits& limits) {
  // Blank lines before a request are allowed (RFC 9112 2.2).
  size_t start = 0;
  while (start < data.size() && (data[start] == '\r' || data[start] == '\n')) ++start;
  const size_t head_end = find_head_end(data, start);
  if (head_end == std::string_view::npos) {
    if (data.size() - start > limits.max_head_bytes) return error(431, "the request head is larger than the server accepts");
    return {};
  }
  if (head_end - start > limits.max_head_bytes) return error(431, "the request head is larger than the server accepts");
  std::string_view head = data.substr(start, head_end - start);

  ParseResult r;
  Request& req = r.request;
  // Request line: METHOD SP TARGET SP HTTP/1.x
  const size_t eol = head.find('\n');
  const std::string_view line = trim(head.substr(0, eol));
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return error(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_token_char))
    return error(400, "malformed request method");
  if (target.empty() || target.find(' ') != std::string_view::npos ||
      std::any_of(target.begin(), target.end(), [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; }))
    return error(400, "malformed request target");
  if (version == "HTTP/1.1") req.minor_version = 1;
  else if (version == "HTTP/1.0") req.minor_version = 0;
  else if (version.rfind("HTTP/", 0) == 0) return error(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  else return error(400, "malformed request line");
  req.method = std::string(method);
  req.target = std::string(target);
  const size_t q = target.find('?');
  req.path = std::string(target.substr(0, q));
  // errors from here on keep the path: the answer takes the shape of its API
  auto with_path = [&req](int status, std::string message) {
    ParseResult e = error(status, std::move(message));
    e.request.path = req.path;
    return e;
  };
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));

  // Header fields
  size_t pos = eol + 1;
  while (pos < head.size()) {
    size_t next = head.find('\n', pos);
    if (next == std::string_view::npos) next = head.size();
    const std::string_view raw = head.substr(pos, next - pos);
    pos = next + 1;
    const std::string_view field = trim(raw);
    if (field.empty()) break;  // the blank line that ends the head
    if (raw.front() == ' ' || raw.front() == '\t') return with_path(400, "obsolete header line folding");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return with_path(400, "malformed header line");
    const std::string_view name = field.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char)) return with_path(400, "malformed header name");
    if (req.headers.size() >= limits.max_headers) return with_path(431, "too many header fields");
    req.headers.emplace_back(lower(name), std::string(trim(field.substr(colon + 1))));
  }

  // Body framing: Content-Length only. A chunked request body is refused
  // (no API client of ours sends one), and framing that disagrees with
  // itself is an error rather than a guess (request smuggling).
  if (req.header("transfer-encoding")) return with_path(411, "send the request body with Content-Length (chunked bodies are not accepted)");
  size_t length = 0;
  bool have_length = false;
  for (const auto& [name, value] : req.headers) {
    if (name != "content-length") continue;
    if (value.empty() || value.size() > 19 || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return with_path(400, "malformed Content-Length: '" + value + "'");
    const size_t n = std::stoull(value);
    if (have_length && n != length) return with_path(400, "conflicting Content-Length headers");
    length = n;
    have_length = true;
  }
  if (length > limits.max_body_bytes) return with_path(413, "the request body is larger than the server accepts (--max-body)");
  r.body_bytes = length;
  r.head_bytes = head_end;
  if (data.size() - head_end < length) {
    r.state = ParseResult::State::HeadComplete;
    return r;
  }
  req.body = std::string(data.substr(head_end, length));
  r.consumed = head_end + length;
  r.state = ParseResult::State::Complete;
  return r;
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }))
      return std::string_view(v);
  return std::nullopt;
}

bool Request::keep_alive() const {
  const std::string conn = lower(header("connection").value_or(""));
  if (conn.find("close") != std::string::npos) return false;
  return minor_version >= 1 || conn.find("keep-alive") != std::string::npos;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

}  // namespace lily::http
