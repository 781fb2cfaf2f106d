// Renders a parsed Jinja template against a context of values, with the
// filters, tests, globals and Python string/dict methods that Hugging Face
// chat templates use.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "lily/text/jinja/ast.h"
#include "lily/text/jinja/limits.h"
#include "lily/text/jinja/value.h"

namespace lily::jinja {

// Raised by the template's own raise_exception(); the message is the template's.
class TemplateRaised : public std::runtime_error {
 public:
  explicit TemplateRaised(const std::string& m) : std::runtime_error(m) {}
};

// Renders `tmpl` with `context` as its global variables. Throws
// TemplateRaised for raise_exception() and lily::Error for other failures.
// `max_steps` bounds the work (tests lower it to reach the bound quickly).
std::string render(const Template& tmpl, const Object& context, uint64_t max_steps = kMaxRenderSteps);

}  // namespace lily::jinja
