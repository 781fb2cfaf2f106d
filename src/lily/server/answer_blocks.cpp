#include "lily/server/answer_blocks.h"

namespace lily::server {

AnswerBlocks::AnswerBlocks(const ApiRequest& req, std::function<std::string(AnswerBlock::Kind)> new_id)
    : req_(req), new_id_(std::move(new_id)), parser_(req.reasoning, req.tools) {
  // the prompt already holds the start of a forced call: the parser must see it too
  if (!req.forced_prefix.empty()) parser_.push(req.forced_prefix);
}

void AnswerBlocks::close(std::vector<BlockEvent>& out) {
  if (!open_) return;
  out.push_back({BlockEvent::Kind::Close, blocks_.size() - 1, ""});
  open_ = false;
}

void AnswerBlocks::add(AnswerBlock::Kind kind, const std::string& text, std::vector<BlockEvent>& out) {
  if (text.empty()) return;
  if (!open_ || blocks_.back().kind != kind) {
    close(out);
    AnswerBlock b;
    b.kind = kind;
    b.id = new_id_(kind);
    blocks_.push_back(std::move(b));
    open_ = true;
    out.push_back({BlockEvent::Kind::Open, blocks_.size() - 1, ""});
  }
  blocks_.back().text += text;
  out.push_back({BlockEvent::Kind::Delta, blocks_.size() - 1, text});
}

std::vector<BlockEvent> AnswerBlocks::take(const JobEvent& ev) {
  std::vector<BlockEvent> out;
  const bool done = ev.kind == JobEvent::Kind::Done;
  const ParsedDelta d = done ? parser_.finish() : parser_.push(ev.text);
  add(AnswerBlock::Kind::Reasoning, d.reasoning, out);
  add(AnswerBlock::Kind::Text, d.content, out);
  for (const ToolCall& c : d.tool_calls) {
    if (!req_.parallel_tool_calls && calls_ > 0) break;  // one call at most was asked for
    close(out);
    AnswerBlock b;
    b.kind = AnswerBlock::Kind::ToolCall;
    b.id = new_id_(b.kind);
    b.call_id = new_id_(b.kind);
    b.call = c;
    blocks_.push_back(std::move(b));
    ++calls_;
    const size_t i = blocks_.size() - 1;
    out.push_back({BlockEvent::Kind::Open, i, ""});
    out.push_back({BlockEvent::Kind::Delta, i, blocks_[i].arguments()});
    out.push_back({BlockEvent::Kind::Close, i, ""});
  }
  if (done) close(out);
  return out;
}

std::string AnswerBlocks::text() const {
  std::string s;
  for (const auto& b : blocks_)
    if (b.kind == AnswerBlock::Kind::Text) s += b.text;
  return s;
}

std::string AnswerBlocks::reasoning() const {
  std::string s;
  for (const auto& b : blocks_)
    if (b.kind == AnswerBlock::Kind::Reasoning) s += b.text;
  return s;
}

}  // namespace lily::server
