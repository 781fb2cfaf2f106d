// The lily subcommands; each registers its options on the CLI11 app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lily::cli {

// A subcommand's body, run after parsing; returns the process exit code.
using Action = std::function<int()>;

struct Command {
  CLI::App* app;
  Action run;
};

Command add_logits_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_template_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_detokenize_command(CLI::App& app);
Command add_quantize_command(CLI::App& app);
Command add_synth_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_audit_command(CLI::App& app);
Command add_pull_command(CLI::App& app);

// Parses "1,2,3" into token ids; throws lily::Error on anything else.
std::vector<int32_t> parse_token_list(const std::string& text);

}  // namespace lily::cli
