// Parses Jinja template text into a syntax tree, applying the whitespace
// rules of Hugging Face's chat-template environment (trim_blocks,
// lstrip_blocks, "-" markers, no trailing newline kept).
#pragma once

#include <memory>
#include <string>

#include "lily/text/jinja/ast.h"

namespace lily::jinja {

// Throws lily::Error with the line number on a syntax error.
std::shared_ptr<Template> parse_template(const std::string& source);

}  // namespace lily::jinja
