// `lily chat [MODEL]`: an interactive conversation. History is kept, and the
// model state at the end of the history is checkpointed so each turn only
// prefills the new messages. /reset starts over, /exit (or end of input)
// quits, Ctrl-C stops the current answer and keeps the session.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>

#include "lily/cli/answer_printer.h"
#include "lily/cli/commands.h"
#include "lily/cli/device_flag.h"
#include "lily/cli/generation_flags.h"
#include "lily/error.h"
#include "lily/runtime/generator.h"
#include "lily/text/output_parser.h"
#include "lily/text/utf8.h"

namespace lily::cli {

namespace {
std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted.store(true); }

// Reads a line; false at end of input. An interrupted read returns an empty line.
bool read_line(std::string& line) {
  line.clear();
  while (true) {
    const int c = std::fgetc(stdin);
    if (c == EOF) {
      if (std::ferror(stdin) && g_interrupted.load()) {
        std::clearerr(stdin);
        line.clear();
        return true;
      }
      return !line.empty();
    }
    if (c == '\n') return true;
    line.push_back(static_cast<char>(c));
  }
}
}  // namespace

Command add_chat_command(CLI::App& app) {
  struct Opts {
    std::string model;
    GenerationFlags gen;
  };
  auto o = std::make_shared<Opts>();
  auto device = std::make_shared<DeviceFlag>();
  CLI::App* sub = app.add_subcommand("chat", "interactive multi-turn chat (/reset, /exit; Ctrl-C stops an answer)");
  sub->add_option("model", o->model, "model directory or Hugging Face repo id (default: the bundled model)");
  o->gen.add_to(sub);
  device->add_to(sub);
  return {sub, [o, device]() {
            o->gen.cpu.apply();
            auto engine = Engine::load(o->model.empty() ? default_model() : o->model, device->backend(&o->gen.cpu));
            struct sigaction sa {};
            sa.sa_handler = on_sigint;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = 0;  // no SA_RESTART: Ctrl-C interrupts a blocking read
            sigaction(SIGINT, &sa, nullptr);
            const bool tty = ::isatty(STDIN_FILENO) != 0;
            const SamplingParams sampling = o->gen.sampling(*engine);
            const int64_t ctx = o->gen.context > 0 ? o->gen.context : engine->model().config().max_position_embeddings;
            o->gen.check_memory(*engine, ctx, std::min<int64_t>(ctx, 4096));
            Session session(engine->model(), engine->backend());
            if (o->gen.mtp > 0) session.set_mtp(o->gen.mtp);
            nlohmann::ordered_json history = nlohmann::ordered_json::array();
            auto reset = [&] {
              history = nlohmann::ordered_json::array();
              if (!o->gen.system.empty()) history.push_back({{"role", "system"}, {"content", o->gen.system}});
            };
            reset();
            std::cerr << "lily chat: " << engine->dir() << " (/reset to start over, /exit to quit)\n";
            std::string line;
            while (true) {
              if (tty) std::cout << "> " << std::flush;
              // A Ctrl-C that came after the last answer counts as one at the prompt.
              bool interrupted = g_interrupted.exchange(false);
              if (!interrupted) {
                if (!read_line(line)) break;
                interrupted = g_interrupted.exchange(false);
              }
              if (interrupted) {
                std::cout << "\n(type /exit to quit)\n";
                continue;
              }
              if (line == "/exit" || line == "/quit") break;
              if (line == "/reset") {
                reset();
                session.reset();
                std::cout << "(conversation cleared)\n";
                continue;
              }
              if (line.empty()) continue;
              if (find_invalid_utf8(line) != std::string::npos) {
                std::cout << "error: input is not valid UTF-8; line ignored\n";
                continue;
              }
              history.push_back({{"role", "user"}, {"content", line}});
              ChatRequest req;
              req.messages = history;
              req.kwargs["enable_thinking"] = !o->gen.no_think;
              GenerationRequest g;
              try {
                // Checkpoint at the end of the history (before the generation prompt): the next
                // turn's prompt starts with exactly these tokens.
                req.add_generation_prompt = false;
                const size_t history_len = engine->chat_prompt(req).size();
                req.add_generation_prompt = true;
                g.prompt = engine->chat_prompt(req);
                g.checkpoint_at = history_len;
              } catch (const Error& e) {
                std::cout << "error: " << e.what() << "\n";
                history.erase(history.end() - 1);
                continue;
              }
              if (static_cast<int64_t>(g.prompt.size()) + o->gen.max_tokens > ctx) {
                std::cout << "error: the conversation (" << g.prompt.size() << " tokens + " << o->gen.max_tokens
                          << " to generate) exceeds the context of " << ctx << " tokens; /reset to start over\n";
                history.erase(history.end() - 1);
                continue;
              }
              g.sampling = sampling;
              g.max_tokens = o->gen.max_tokens;
              g.stop = o->gen.stop;
              g.cancel = &g_interrupted;
              OutputParser parser(!o->gen.no_think, nullptr);
              AnswerPrinter printer(o->gen.hide_reasoning);
              ParsedDelta whole;
              const GenerationResult r = generate(*engine, session, g, [&](const std::string& text) {
                ParsedDelta d = parser.push(text);
                whole.append(d);
                printer.print(d);
                return true;
              });
              ParsedDelta tail = parser.finish();
              whole.append(tail);
              printer.print(tail);
              printer.finish();
              if (r.finish_reason == "cancelled") std::cout << "(stopped)\n";
              g_interrupted.store(false);
              nlohmann::ordered_json reply = {{"role", "assistant"}, {"content", whole.content}};
              if (!whole.reasoning.empty()) reply["reasoning_content"] = whole.reasoning;
              history.push_back(reply);
              std::cerr << "[" << speed_line(r) << "]\n";
            }
            return 0;
          }};
}

}  // namespace lily::cli
