// The web chat page `lily serve` answers at / (web/chat_page.html, built into
// the binary): streaming answers, reasoning, tool calls and results, several
// conversations kept in the browser, with no asset from anywhere else.
#pragma once

#include <string_view>

namespace lily::server {

extern const std::string_view kChatPage;

// What the page may load and where it may connect: only itself and this
// server, so text it shows can never fetch or send anything elsewhere.
inline constexpr const char* kChatPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace lily::server
