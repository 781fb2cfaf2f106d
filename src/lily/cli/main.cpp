// lily: a local inference engine for Qwen3.6-35B-A3B.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "lily/cli/commands.h"
#include "lily/version.h"
#include "lily/error.h"

int main(int argc, char** argv) {
  CLI::App app{"lily: local inference for Qwen3.6-35B-A3B (qwen3_5_moe)"};
  app.set_version_flag("--version", lily::version_line());
  app.require_subcommand(1);
  const std::vector<lily::cli::Command> commands = {
      lily::cli::add_run_command(app),
      lily::cli::add_chat_command(app),
#ifdef LILY_WITH_SERVER
      lily::cli::add_serve_command(app),
      lily::cli::add_audit_command(app),
#endif
      lily::cli::add_template_command(app),
      lily::cli::add_tokenize_command(app),
      lily::cli::add_detokenize_command(app),
      lily::cli::add_quantize_command(app),
      lily::cli::add_synth_command(app),
      lily::cli::add_bench_command(app),
      lily::cli::add_logits_command(app),
      lily::cli::add_generate_command(app),
      lily::cli::add_info_command(app),
      lily::cli::add_pull_command(app),
  };
  std::string names;
  bool known = false;
  for (const auto& c : commands) {
    names += (names.empty() ? "" : ", ") + c.app->get_name();
    known |= argc > 1 && c.app->get_name() == argv[1];
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "error: unknown command '" << argv[1] << "' (commands: " << names << ")\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const lily::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
