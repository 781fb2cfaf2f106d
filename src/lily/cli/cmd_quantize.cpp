// `lily quantize`: an MLX affine-quantized checkpoint (--bits) or a GGUF file
// in llama.cpp's layout (--gguf TYPE), from a Hugging Face one.
#include <iostream>
#include <memory>

#include "lily/cli/commands.h"
#include "lily/error.h"
#include "lily/quant/gguf_export.h"
#include "lily/quant/mlx_export.h"

namespace lily::cli {

Command add_quantize_command(CLI::App& app) {
  struct Opts {
    std::string src, dst, gguf;
    int bits = 0;
    quant::ExportOptions opt;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "quantize", "write an MLX-layout affine-quantized checkpoint (mlx-lm compatible) or a GGUF file (llama.cpp)");
  sub->add_option("--model", o->src, "source checkpoint directory (Hugging Face layout)")->required();
  sub->add_option("--out", o->dst, "output directory (MLX) or file (GGUF)")->required();
  auto* bits = sub->add_option("--bits", o->bits, "MLX: bits per weight, 2, 3, 4, 5, 6 or 8");
  sub->add_option("--group-size", o->opt.group_size, "MLX: inputs per scale and bias, 32, 64 or 128");
  auto* gguf = sub->add_option("--gguf", o->gguf, "GGUF: f32, f16, bf16, q8_0, q4_0, q6_k or q4_k_m");
  bits->excludes(gguf);
  return {sub, [o]() {
            if (!o->gguf.empty()) {
              quant::export_gguf(o->src, o->dst, {o->gguf});
              std::cout << "wrote " << o->dst << " (GGUF " << o->gguf << ")\n";
              return 0;
            }
            if (o->bits == 0) throw Error("lily quantize needs --bits (MLX) or --gguf TYPE (GGUF)");
            o->opt.bits = o->bits;
            quant::export_mlx(o->src, o->dst, o->opt);
            std::cout << "wrote " << o->dst << " (" << o->opt.bits << "-bit, group " << o->opt.group_size << ")\n";
            return 0;
          }};
}

}  // namespace lily::cli
