// Prints a streamed answer to the terminal: reasoning set apart (dim on a
// terminal, inside <think> tags otherwise, or hidden), content as is, tool
// calls as one JSON line each; and the speed line at the end.
#pragma once

#include <cstdio>
#include <string>

#include "lily/runtime/generator.h"
#include "lily/text/output_parser.h"

namespace lily::cli {

class AnswerPrinter {
 public:
  AnswerPrinter(bool hide_reasoning, std::FILE* out = stdout);
  void print(const ParsedDelta& d);
  void finish();  // closes an open reasoning block and ends the line

 private:
  bool hide_, tty_;
  std::FILE* out_;
  bool in_reasoning_ = false, wrote_ = false;
};

// "prompt: 12 tokens (5 reused), 340.2 tok/s | generation: 40 tokens, 55.1 tok/s"
std::string speed_line(const GenerationResult& r);

}  // namespace lily::cli
