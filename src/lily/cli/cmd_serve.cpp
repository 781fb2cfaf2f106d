// `lily serve [MODEL]`: the OpenAI-compatible server on a local port.
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>

#include "lily/cli/commands.h"
#include "lily/cli/device_flag.h"
#include "lily/cli/generation_flags.h"
#include "lily/error.h"
#include "lily/runtime/memory_plan.h"
#include "lily/server/http_server.h"

namespace lily::cli {

namespace {
server::HttpServer* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

// Sequences and the prefix cache share what the budget leaves after the
// weights: every sequence slot must be able to reach the full context, and
// the cache gets the rest (up to its own limit).
void plan_server_memory(const Engine& engine, server::ServerOptions& opt, double budget_gb) {
  const MemoryPlan one = plan_memory(engine.model(), opt.context, opt.scheduler.prefill_chunk);
  const size_t per_seq = one.gdn_state + one.kv_cache, seqs = opt.scheduler.max_sequences;
  const size_t fixed = one.weights + one.scratch + seqs * per_seq;
  std::cerr << one.describe() << "; " << seqs << " sequences at " << opt.context
            << " tokens need " << static_cast<double>(fixed) / (1 << 30) << " GiB\n";
  // On a GPU the weights are already there: sequences and the cache share what it has left.
  if (const size_t free = engine.backend()->memory_free(); free > 0) {
    const size_t need = fixed - one.weights;
    if (need > free)
      throw Error(std::to_string(seqs) + " sequences at " + std::to_string(opt.context) + " tokens need " +
                  std::to_string(need >> 20) + " MiB beyond the weights, but " + engine.backend()->describe() +
                  " has " + std::to_string(free >> 20) + " MiB free: lower --ctx-size or --parallel");
    opt.scheduler.cache_bytes = std::min(opt.scheduler.cache_bytes, (free - need) / 10 * 9);
  }
  if (budget_gb <= 0) return;
  const double budget = budget_gb * (1ull << 30);
  if (static_cast<double>(fixed) > budget)
    throw Error("the plan needs " + std::to_string(static_cast<double>(fixed) / (1 << 30)) + " GiB but the budget is " +
                std::to_string(budget_gb) + " GiB: lower --ctx-size or --parallel");
  opt.scheduler.cache_bytes = std::min(opt.scheduler.cache_bytes, static_cast<size_t>(budget - static_cast<double>(fixed)));
  std::cerr << "prefix cache: " << static_cast<double>(opt.scheduler.cache_bytes) / (1 << 30) << " GiB\n";
}
bool sub_device_given(const CLI::App& sub) {
  const CLI::Option* opt = sub.get_option_no_throw("--device");
  return opt && opt->count() > 0;
}

// The deployment file's engine and routing policy. The engine must be one
// this build can serve; a routing policy (or an audit log) makes the router.
std::shared_ptr<router::HybridRouter> hybrid_router(const router::DeploymentConfig* config, const std::string& path,
                                                    const std::string& audit_log, DeviceFlag& device,
                                                    bool device_given) {
  if (!config) {
    if (!audit_log.empty()) throw Error("--audit-log records routing decisions: it needs --deployment-config");
    return nullptr;
  }
#ifndef LILY_HAVE_CUDA
  if (config->engine == "lily-cuda")
    throw Error("--deployment-config: " + path + " asks for the engine 'lily-cuda', but this build has no CUDA backend");
#endif
  const std::string wanted = config->engine == "lily-cuda" ? "cuda" : config->engine == "lily-cpu" ? "cpu" : "auto";
  if (!device_given)
    device.name = wanted;
  else if (wanted != "auto" && device.name != wanted)
    throw Error("--deployment-config: " + path + " asks for the engine '" + config->engine + "' but --device is " +
                device.name);
  if (!config->has_routing && audit_log.empty()) return nullptr;
  try {
    auto r = std::make_shared<router::HybridRouter>(*config, audit_log);
    if (!r->destination().empty()) std::cerr << "lily serve: cloud tier " << r->destination() << "\n";
    return r;
  } catch (const Error& e) {
    throw Error(std::string("--deployment-config: ") + e.what());
  }
}
}  // namespace

Command add_serve_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> model;
    server::ServerOptions server;
    double cache_gb = 4;
    bool no_cache = false;
    double budget_gb = 0;
    std::string deployment_config, audit_log;
    CpuFlags cpu;
  };
  auto o = std::make_shared<Opts>();
  auto device = std::make_shared<DeviceFlag>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server (MODEL defaults to the bundled model)");
  sub->add_option("model", o->model, "a model directory or Hugging Face repo id")->expected(0, 1);
  sub->add_option("--host", o->server.host, "address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", o->server.port, "port (default 8080; 0: any free one, printed at start)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", o->server.api_key, "require 'Authorization: Bearer KEY' (also $LILY_API_KEY)")
      ->envname("LILY_API_KEY");
  sub->add_option("--alias", o->server.model_name, "model id reported by /v1/models");
  sub->add_option("--ctx-size", o->server.context, "longest prompt + answer in tokens (default: the model's maximum)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  sub->add_option("--parallel", o->server.scheduler.max_sequences, "sequences decoded together (default 16)");
  sub->add_option("--queue", o->server.scheduler.max_queue, "requests that may wait beyond those; more get 503");
  sub->add_option("--prefill-chunk", o->server.scheduler.prefill_chunk,
                  "prompt tokens computed between two decode steps (rounded down to a multiple of 64)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_option("--cache-gb", o->cache_gb, "prefix cache size in GiB (default 4)")->check(CLI::Range(0.0, 1e6));
  sub->add_flag("--no-prefix-cache", o->no_cache, "never reuse prompt prefixes");
  sub->add_option("--mtp", o->server.scheduler.mtp,
                  "speculative decoding: K tokens drafted a step by the checkpoint's MTP head, verified for every "
                  "sequence in one step (answers unchanged; 0 = off)")
      ->check(CLI::Range(0, 8));
  sub->add_option("--timeout", o->server.request_timeout_s, "seconds a request may run (default 600)")
      ->check(CLI::Range(0.001, 1e9));
  sub->add_option("--max-body", o->server.max_body_bytes, "largest request body in bytes");
  sub->add_option("--head-timeout", o->server.http.head_timeout_s,
                  "seconds a client has to send a request's head, whole (default 10)")
      ->check(CLI::Range(0.01, 3600.0));
  sub->add_option("--body-timeout", o->server.http.body_timeout_s,
                  "seconds a client has to send a request's body, whole (default 60)")
      ->check(CLI::Range(0.01, 86400.0));
  sub->add_option("--max-connections", o->server.http.max_connections, "connections open at once (default 1024)")
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  sub->add_option("--max-connections-per-client", o->server.http.max_connections_per_address,
                  "connections open at once from one client address (default 256)")
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  sub->add_flag("--special-tokens-in-content", o->server.special_tokens_in_content,
                "let text in messages and tool results that spells a control token (<|im_end|>, <tool_call>, ...) "
                "become that token, as plain templating does (off: it stays text)");
  sub->add_flag("--cors", o->server.cors, "answer browsers from other origins (off by default)");
  sub->add_option("--cors-origin", o->server.cors_origin, "the allowed origin with --cors (default *)");
  sub->add_option("--memory-budget", o->budget_gb, "GiB for weights, sequences and cache; refuse to start beyond it");
  sub->add_option("--deployment-config", o->deployment_config,
                  "JSON deployment file: the engine, the memory budget (memoryAllocationGB) and the hybrid "
                  "local/cloud routing policy (hybridRouting)");
  sub->add_option("--audit-log", o->audit_log,
                  "append a JSON line for every routing decision and every call to the cloud tier to this file");
  o->cpu.add_to(sub);
  device->add_to(sub);
  return {sub, [o, device, sub]() {
            o->cpu.apply();
            const std::string model = o->model.empty() ? default_model() : o->model[0];
            std::optional<router::DeploymentConfig> deployment;
            if (!o->deployment_config.empty()) deployment = read_deployment_config(o->deployment_config);
            const router::DeploymentConfig* d = deployment ? &*deployment : nullptr;
            o->server.router = hybrid_router(d, o->deployment_config, o->audit_log, *device, sub_device_given(*sub));
            const double budget = memory_budget_gb(o->budget_gb, d);
            const std::string& host = o->server.host;
            const bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
            if (!loopback && o->server.api_key.empty())
              std::cerr << "lily serve: warning: listening on " << host
                        << " without --api-key: anyone who can reach this address can use the model\n";
            o->server.scheduler.cache_enabled = !o->no_cache;
            o->server.scheduler.cache_bytes = static_cast<size_t>(o->cache_gb * (1ull << 30));
            server::HttpServer srv(o->server);
            g_server = &srv;
            std::signal(SIGINT, on_signal);
            std::signal(SIGTERM, on_signal);
            std::signal(SIGPIPE, SIG_IGN);
            srv.run(
                [&](server::ServerOptions& opt) {
                  auto engine = Engine::load(model, device->backend(&o->cpu));
                  opt.resolve_context(engine->model().config());  // the memory plan needs it before the server starts
                  plan_server_memory(*engine, opt, budget);
                  return engine;
                },
                [&](int port) {
                  std::cerr << "lily serve: listening on http://" << o->server.host << ":" << port << " (loading "
                            << model << ")" << std::endl;
                });
            g_server = nullptr;
            return 0;
          }};
}

}  // namespace lily::cli
