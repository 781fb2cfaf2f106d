// Detectors that find sensitive data in free text: credentials of the common
// kinds (private keys, cloud and API tokens, JWTs, passwords, connection
// strings, .env-style secrets), also inside base64 or hex, and signs of local
// files (paths, attached or pasted file contents, source code). A finding
// names the kind and where it was seen, never the matched text, so it can be
// logged. The detectors err towards finding: a false positive keeps a request
// on the machine, a false negative could send a secret away.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lily::router {

struct Finding {
  std::string category;  // a data category (deployment_config.h)
  std::string kind;      // what was found: "aws_access_key_id", "declares tool read_file", ...
  std::string where;     // where in the request: "messages[2].content", "across messages", ...
};

// Appends the findings in `text` to `out`. Text that decodes from base64 or
// hex is scanned again (two levels deep at most).
void scan_text(std::string_view text, const std::string& where, std::vector<Finding>& out);

// Only the credential detectors that recognise a token by its shape, for text
// joined across messages with the whitespace between the pieces taken out
// (a key split over two messages, or over lines).
void scan_joined(std::string_view text, const std::string& where, std::vector<Finding>& out);

}  // namespace lily::router
