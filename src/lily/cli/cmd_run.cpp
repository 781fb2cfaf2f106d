// `lily run [MODEL] PROMPT`: one chat turn, streamed to the terminal.
#include <filesystem>
#include <iostream>
#include <memory>

#include "lily/cli/answer_printer.h"
#include "lily/cli/commands.h"
#include "lily/cli/device_flag.h"
#include "lily/cli/generation_flags.h"
#include "lily/error.h"
#include "lily/runtime/generator.h"
#include "lily/text/output_parser.h"

namespace lily::cli {

Command add_run_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> args;
    GenerationFlags gen;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto device = std::make_shared<DeviceFlag>();
  CLI::App* sub = app.add_subcommand("run", "answer one prompt, streaming the reply (MODEL defaults to the bundled model)");
  sub->add_option("args", o->args, "[MODEL] PROMPT: a model directory or Hugging Face repo id, then the prompt")
      ->required()
      ->expected(1, 2);
  o->gen.add_to(sub);
  device->add_to(sub);
  sub->add_flag("--quiet", o->quiet, "do not print the speed line");
  return {sub, [o, device]() {
            const std::string model = o->args.size() == 2 ? o->args[0] : default_model();
            const std::string prompt = o->args.back();
            std::error_code ec;
            if (o->args.size() == 1 && std::filesystem::is_directory(prompt, ec))
              throw Error("'" + prompt + "' is a directory, not a prompt: give the prompt after the model (lily run MODEL \"PROMPT\")");
            o->gen.cpu.apply();
            auto engine = Engine::load(model, device->backend(&o->gen.cpu));
            ChatRequest req;
            if (!o->gen.system.empty()) req.messages.push_back({{"role", "system"}, {"content", o->gen.system}});
            req.messages.push_back({{"role", "user"}, {"content", prompt}});
            req.kwargs["enable_thinking"] = !o->gen.no_think;
            GenerationRequest g;
            g.prompt = engine->chat_prompt(req);
            const int64_t ctx = o->gen.context > 0 ? o->gen.context : engine->model().config().max_position_embeddings;
            const int64_t prompt_tokens = static_cast<int64_t>(g.prompt.size());
            if (ctx > 0 && prompt_tokens + o->gen.max_tokens > ctx)
              throw Error("the prompt has " + std::to_string(prompt_tokens) + " tokens and --max-tokens is " +
                          std::to_string(o->gen.max_tokens) + ": together more than the context of " +
                          std::to_string(ctx) + " tokens");
            o->gen.check_memory(*engine, static_cast<int64_t>(g.prompt.size()) + o->gen.max_tokens,
                                static_cast<int64_t>(g.prompt.size()));
            g.sampling = o->gen.sampling(*engine);
            g.max_tokens = o->gen.max_tokens;
            g.stop = o->gen.stop;
            Session session(engine->model(), engine->backend());
            if (o->gen.mtp > 0) session.set_mtp(o->gen.mtp);
            OutputParser parser(!o->gen.no_think, nullptr);
            AnswerPrinter printer(o->gen.hide_reasoning);
            const GenerationResult r = generate(*engine, session, g, [&](const std::string& text) {
              printer.print(parser.push(text));
              return true;
            });
            printer.print(parser.finish());
            printer.finish();
            if (!o->quiet) std::cerr << "[" << speed_line(r) << "]\n";
            return 0;
          }};
}

}  // namespace lily::cli
