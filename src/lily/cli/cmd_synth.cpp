// `lily synth`: a random-weight checkpoint with the real shapes, for benchmarks.
#include <iostream>
#include <memory>

#include "lily/cli/commands.h"
#include "lily/tools/synth.h"

namespace lily::cli {

Command add_synth_command(CLI::App& app) {
  struct Opts {
    std::string out;
    SynthOptions opt;
    bool full = false;
  };
  auto o = std::make_shared<Opts>();
  o->opt.format = "mlx4";
  CLI::App* sub = app.add_subcommand("synth", "write a random-weight checkpoint with the real Qwen3.6-35B-A3B shapes");
  sub->add_option("--out", o->out, "output directory")->required();
  sub->add_option("--layers", o->opt.layers, "the first N layers (default 4)");
  sub->add_flag("--full", o->full, "all 40 layers");
  sub->add_option("--format", o->opt.format, "bf16 (official release layout), mlx4, mlx6 or mlx8");
  sub->add_option("--vocab", o->opt.vocab, "vocabulary rows (default the real 248320; smaller only for tests)");
  sub->add_option("--seed", o->opt.seed, "random seed");
  sub->add_flag("--mtp", o->opt.mtp, "also the multi-token-prediction head (mtp.*), as the release ships it");
  return {sub, [o]() {
            if (o->full) o->opt.layers = 40;
            write_synth_checkpoint(o->out, o->opt);
            std::cout << "wrote " << o->out << " (" << o->opt.layers << " layers, " << o->opt.format
                      << (o->opt.mtp ? ", MTP head" : "") << ")\n";
            return 0;
          }};
}

}  // namespace lily::cli
