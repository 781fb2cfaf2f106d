// `lily info`: what a checkpoint is: architecture, sizes, dtypes, layout and memory.
#include <iostream>
#include <memory>

#include "lily/cli/commands.h"
#include "lily/cli/generation_flags.h"
#include "lily/io/model_locator.h"
#include "lily/model/model.h"
#include "lily/units.h"

namespace lily::cli {

namespace {
// What a GGUF file says of itself beyond the config: its general.* keys, the
// tokenizer and whether it brings a chat template.
void print_gguf(const GgufModel& g) {
  std::cout << "gguf:         version " << g.first().version() << ", " << g.files().size() << " file"
            << (g.files().size() == 1 ? "" : "s") << ", " << g.tensors().size() << " tensors, "
            << g.first().metadata().size() << " metadata keys\n";
  for (const auto& [key, value] : g.first().metadata()) {
    if (key.rfind("general.", 0) != 0) continue;
    std::cout << "              " << key << " = ";
    if (value.is_string())
      std::cout << value.as_string(key);
    else if (value.is_array())
      std::cout << "[" << value.as_array(key).size() << " entries]";
    else if (const auto* b = std::get_if<bool>(&value.v))
      std::cout << (*b ? "true" : "false");
    else if (const auto* d = std::get_if<double>(&value.v))
      std::cout << *d;
    else
      std::cout << value.as_int(key);
    std::cout << "\n";
  }
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  const GgufValue* model = g.find("tokenizer.ggml.model");
  const GgufValue* pre = g.find("tokenizer.ggml.pre");
  std::cout << "tokenizer:    "
            << (tokens ? (model && model->is_string() ? model->as_string("m") : std::string("?")) + " (pre " +
                             (pre && pre->is_string() ? pre->as_string("p") : std::string("-")) + "), " +
                             std::to_string(tokens->is_array() ? tokens->as_array("t").size() : 0) + " tokens"
                       : std::string("none in the file"))
            << "; chat template: " << (g.find("tokenizer.chat_template") ? "yes" : "no") << "\n";
}
}  // namespace

Command add_info_command(CLI::App& app) {
  struct Opts {
    std::string model;
    int64_t context = 4096;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("info", "architecture, sizes, dtypes, layout and memory of a checkpoint");
  sub->add_option("--model", o->model, "model directory, GGUF file or Hugging Face repo id (default: the bundled model)");
  sub->add_option("--context", o->context, "context length for the memory estimate")->check(CLI::PositiveNumber);
  return {sub, [o]() {
            const std::string path = locate_model(o->model.empty() ? default_model() : o->model);
            auto model = Model::load(path);
            const ModelConfig& c = model->config();
            const LoadReport& r = model->report();
            std::string kinds;
            for (LayerKind k : c.layer_kinds) kinds += (k == LayerKind::FullAttention ? 'A' : 'D');
            std::cout << "model:        " << path << "\n"
                      << "architecture: qwen3_5_moe (model_type " << c.model_type << ")\n"
                      << "layout:       " << layout_name(r.layout) << "\n"
                      << "layers:       " << c.num_layers << " (" << c.num_layers_of(LayerKind::LinearAttention)
                      << " Gated DeltaNet, " << c.num_layers_of(LayerKind::FullAttention)
                      << " full attention): " << kinds << "\n"
                      << "hidden:       " << c.hidden_size << ", vocab " << c.vocab_size << "\n"
                      << "attention:    " << c.num_heads << " heads, " << c.num_kv_heads << " kv heads, head_dim "
                      << c.head_dim << ", rotary " << c.rotary_dim << ", theta " << c.rope_theta << "\n"
                      << "deltanet:     " << c.linear_num_key_heads << " qk heads x " << c.linear_key_head_dim << ", "
                      << c.linear_num_value_heads << " v heads x " << c.linear_value_head_dim << ", conv kernel "
                      << c.linear_conv_kernel << "\n"
                      << "moe:          " << c.num_experts << " experts, top " << c.experts_per_token
                      << ", intermediate " << c.moe_intermediate_size << ", shared expert "
                      << c.shared_expert_intermediate_size << "\n"
                      << "parameters:   " << r.parameters << " (text model)\n"
                      << "dtypes:      ";
            for (const auto& [d, n] : r.dtype_counts) {
              auto bytes = r.dtype_bytes.find(d);
              std::cout << " " << d << " x" << n;
              if (bytes != r.dtype_bytes.end()) std::cout << " (" << human_bytes(static_cast<double>(bytes->second)) << ")";
            }
            std::cout << "\n";
            if (const GgufModel* g = model->gguf()) print_gguf(*g);
            std::cout << "mtp head:     "
                      << (model->weights().mtp ? std::string("present (speculative decoding with --mtp K)")
                          : !r.mtp_note.empty() ? "not used: " + r.mtp_note
                          : r.layout == CheckpointLayout::Mlx
                              ? std::string("absent: MLX conversions drop it, so --mtp needs the release or an MTP GGUF")
                              : std::string("absent"))
                      << "\n";
            for (const auto& [g, n] : r.skipped_groups) std::cout << "skipped:      " << g << ".* (" << n << " tensors)\n";
            if (!r.ignored.empty()) std::cout << "ignored:      " << r.ignored.size() << " unused tensors\n";
            const double kv = static_cast<double>(model->kv_bytes_per_token());
            const double state = static_cast<double>(model->recurrent_state_bytes());
            std::cout << "memory:       weights " << human_bytes(static_cast<double>(r.weight_bytes)) << " (mapped)"
                      << ", GDN state " << human_bytes(state) << " per sequence"
                      << ", KV cache " << human_bytes(kv) << " per token\n"
                      << "              at context " << o->context << ": "
                      << human_bytes(static_cast<double>(r.weight_bytes) + state + kv * static_cast<double>(o->context))
                      << " for one sequence\n";
            return 0;
          }};
}

}  // namespace lily::cli
