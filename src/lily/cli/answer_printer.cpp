#include "lily/cli/answer_printer.h"

#include <unistd.h>

namespace lily::cli {

AnswerPrinter::AnswerPrinter(bool hide, std::FILE* out) : hide_(hide), tty_(::isatty(::fileno(out)) != 0), out_(out) {}

void AnswerPrinter::print(const ParsedDelta& d) {
  if (!d.reasoning.empty() && !hide_) {
    if (!in_reasoning_) {
      std::fputs(tty_ ? "\x1b[2m" : "<think>\n", out_);
      in_reasoning_ = true;
    }
    std::fputs(d.reasoning.c_str(), out_);
    wrote_ = true;
  }
  if (!d.content.empty() || !d.tool_calls.empty()) {
    if (in_reasoning_) {
      std::fputs(tty_ ? "\x1b[0m\n" : "\n</think>\n", out_);
      in_reasoning_ = false;
    }
    std::fputs(d.content.c_str(), out_);
    for (const auto& c : d.tool_calls) {
      nlohmann::ordered_json j = {{"tool_call", c.name}, {"arguments", c.arguments}};
      std::fprintf(out_, "\n%s\n", j.dump().c_str());
    }
    wrote_ = true;
  }
  std::fflush(out_);
}

void AnswerPrinter::finish() {
  if (in_reasoning_) std::fputs(tty_ ? "\x1b[0m" : "\n</think>", out_);
  in_reasoning_ = false;
  if (wrote_) std::fputs("\n", out_);
  wrote_ = false;
  std::fflush(out_);
}

std::string speed_line(const GenerationResult& r) {
  const int64_t computed = r.prompt_tokens - r.reused_tokens;
  const int64_t generated = static_cast<int64_t>(r.tokens.size());
  char buf[256];
  std::snprintf(buf, sizeof buf, "prompt: %lld tokens (%lld reused), %.1f tok/s | generation: %lld tokens, %.1f tok/s",
                static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.reused_tokens),
                r.prefill_seconds > 0 ? computed / r.prefill_seconds : 0.0, static_cast<long long>(generated),
                r.decode_seconds > 0 && generated > 1 ? (generated - 1) / r.decode_seconds : 0.0);
  std::string line = buf;
  if (r.verify_steps > 0) {
    // every verify step but a final cut-short one yields the tokens it accepted plus one
    std::snprintf(buf, sizeof buf, " | mtp: %lld steps, %.2f tokens a step", static_cast<long long>(r.verify_steps),
                  static_cast<double>(generated - 1) / static_cast<double>(r.verify_steps));
    line += buf;
  }
  return line;
}

}  // namespace lily::cli
