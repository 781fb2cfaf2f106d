// `lily generate`: greedy continuation of a token list, printed as a JSON list of ids.
#include <iostream>
#include <memory>

#include "lily/cli/commands.h"
#include "lily/cli/device_flag.h"
#include "lily/model/qwen35moe.h"
#include "lily/runtime/greedy.h"

namespace lily::cli {

Command add_generate_command(CLI::App& app) {
  struct Opts {
    std::string model, tokens;
    int64_t max_tokens = 16;
    bool ignore_eos = false;
  };
  auto o = std::make_shared<Opts>();
  auto device = std::make_shared<DeviceFlag>();
  CLI::App* sub = app.add_subcommand("generate", "greedy continuation of token ids, printed as a JSON list");
  sub->add_option("--model", o->model, "model directory")->required();
  sub->add_option("--tokens", o->tokens, "comma-separated prompt token ids")->required();
  sub->add_option("--max-tokens", o->max_tokens, "number of tokens to generate")->check(CLI::NonNegativeNumber);
  sub->add_flag("--ignore-eos", o->ignore_eos, "keep generating past the model's end-of-sequence ids");
  device->add_to(sub);
  return {sub, [o, device]() {
            const std::vector<int32_t> prompt = parse_token_list(o->tokens);
            auto model = Model::load(o->model);
            Qwen35MoeForward fwd(*model, device->backend());
            SequenceState state = fwd.new_state();
            GreedyOptions opt;
            opt.max_tokens = o->max_tokens;
            if (!o->ignore_eos) opt.stop_ids = model->config().eos_token_ids;
            const std::vector<int32_t> ids = generate_greedy(fwd, state, prompt, opt);
            std::cout << "[";
            for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
            std::cout << "]\n";
            return 0;
          }};
}

}  // namespace lily::cli
