// `lily logits`: float32 logits for every position of a token list, for
// checking the engine against reference outputs. The exact float path
// unless --int8-activations asks for the fast decode products (to measure
// what their rounding moves, or to compare with an engine that rounds too).
#include <cstdio>
#include <memory>

#include "lily/cli/commands.h"
#include "lily/cli/device_flag.h"
#include "lily/error.h"
#include "lily/model/qwen35moe.h"

namespace lily::cli {

Command add_logits_command(CLI::App& app) {
  struct Opts {
    std::string model, tokens, out;
    bool decode = false;
    int64_t chunk = 0;
    CpuFlags cpu;
  };
  auto o = std::make_shared<Opts>();
  auto device = std::make_shared<DeviceFlag>();
  CLI::App* sub = app.add_subcommand("logits", "write float32 little-endian logits [T, vocab] for every position");
  sub->add_option("--model", o->model, "model directory")->required();
  sub->add_option("--tokens", o->tokens, "comma-separated token ids")->required();
  sub->add_option("--out", o->out, "output file")->required();
  sub->add_flag("--decode", o->decode, "feed the tokens one at a time through the caches instead of one prefill");
  sub->add_option("--chunk", o->chunk, "feed the prompt in pieces of this many tokens")->check(CLI::PositiveNumber);
  sub->add_flag("--int8-activations", o->cpu.int8_activations,
                "round the inputs of quantized products to int8 as the fast path does (an error without a kernel)");
  device->add_to(sub);
  return {sub, [o, device]() {
            const std::vector<int32_t> tokens = parse_token_list(o->tokens);
            auto model = Model::load(o->model);
            if (!o->cpu.int8_activations) o->cpu.float_activations = true;
            Qwen35MoeForward fwd(*model, device->backend(&o->cpu));
            SequenceState state = fwd.new_state();
            const size_t step = o->decode ? 1 : (o->chunk > 0 ? static_cast<size_t>(o->chunk) : tokens.size());
            std::vector<float> all;
            for (size_t i = 0; i < tokens.size(); i += step) {
              const size_t n = std::min(step, tokens.size() - i);
              std::vector<float> l = fwd.forward(std::span<const int32_t>(tokens.data() + i, n), state,
                                                 LogitsFor::AllPositions);
              all.insert(all.end(), l.begin(), l.end());
            }
            std::FILE* f = std::fopen(o->out.c_str(), "wb");
            if (f == nullptr) throw Error("cannot write " + o->out);
            const size_t written = std::fwrite(all.data(), sizeof(float), all.size(), f);
            const bool ok = std::fclose(f) == 0 && written == all.size();
            if (!ok) throw Error("failed writing " + o->out);
            return 0;
          }};
}

}  // namespace lily::cli
