// `lily quantize`: write an MLX affine-quantized checkpoint from a bf16 one.
#include <iostream>
#include <memory>

#include "lily/cli/commands.h"
#include "lily/quant/mlx_export.h"

namespace lily::cli {

Command add_quantize_command(CLI::App& app) {
  struct Opts {
    std::string src, dst;
    quant::ExportOptions opt;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("quantize", "write an MLX-layout affine-quantized checkpoint (mlx-lm compatible)");
  sub->add_option("--model", o->src, "source checkpoint directory (Hugging Face layout)")->required();
  sub->add_option("--out", o->dst, "output directory")->required();
  sub->add_option("--bits", o->opt.bits, "bits per weight: 2, 3, 4, 5, 6 or 8")->required();
  sub->add_option("--group-size", o->opt.group_size, "inputs per scale and bias: 32, 64 or 128");
  return {sub, [o]() {
            quant::export_mlx(o->src, o->dst, o->opt);
            std::cout << "wrote " << o->dst << " (" << o->opt.bits << "-bit, group " << o->opt.group_size << ")\n";
            return 0;
          }};
}

}  // namespace lily::cli
