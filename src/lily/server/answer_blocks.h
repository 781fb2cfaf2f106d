// An answer as the ordered blocks that the Responses and Messages APIs show:
// reasoning, then text, then tool calls (text may follow a call too). Text
// from the job goes through the output parser; each block is opened, grown
// and closed as it arrives, and the block events tell a stream what to send.
// A tool call arrives whole (the parser gives it once its closing tag is
// seen), so it opens, takes its arguments as one delta and closes at once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lily/runtime/scheduler.h"
#include "lily/server/openai_request.h"
#include "lily/text/output_parser.h"

namespace lily::server {

struct AnswerBlock {
  enum class Kind { Reasoning, Text, ToolCall } kind = Kind::Text;
  std::string id;       // the block's id in its API (rs_, msg_, fc_, toolu_ ...)
  std::string call_id;  // ToolCall: the id the client answers the call with
  std::string text;     // Reasoning and Text: all of it so far
  ToolCall call;        // ToolCall
  std::string arguments() const { return call.arguments.dump(); }
};

struct BlockEvent {
  enum class Kind { Open, Delta, Close } kind = Kind::Open;
  size_t index = 0;   // into blocks()
  std::string delta;  // Delta: new text, or a call's arguments as JSON
};

class AnswerBlocks {
 public:
  // `new_id(kind)` makes the id of a new block; tool calls get a second
  // one from it for call_id.
  AnswerBlocks(const ApiRequest& req, std::function<std::string(AnswerBlock::Kind)> new_id);

  // A job event's text (Done flushes the parser and closes the open block).
  std::vector<BlockEvent> take(const JobEvent& ev);

  const std::vector<AnswerBlock>& blocks() const { return blocks_; }
  bool has_calls() const { return calls_ > 0; }
  std::string text() const;       // all text blocks
  std::string reasoning() const;  // all reasoning blocks

 private:
  void add(AnswerBlock::Kind kind, const std::string& text, std::vector<BlockEvent>& out);
  void close(std::vector<BlockEvent>& out);

  const ApiRequest& req_;
  std::function<std::string(AnswerBlock::Kind)> new_id_;
  OutputParser parser_;
  std::vector<AnswerBlock> blocks_;
  bool open_ = false;
  size_t calls_ = 0;
};

}  // namespace lily::server
