// `lily bench`: prefill and decode speed by context, one fresh process per
// configuration, printed like llama-bench and written as JSON, with decode
// set against this machine's memory-bandwidth roofline.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "lily/backend/cpu/thread_pool.h"
#include "lily/cli/commands.h"
#include "lily/backend/cpu/cpu_context.h"
#include "lily/cli/device_flag.h"
#include "lily/cli/generation_flags.h"
#include "lily/io/mapped_file.h"
#include "lily/error.h"
#include "lily/runtime/bench.h"

namespace lily::cli {

namespace {
std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot find the lily binary to start the benchmark processes");
  return std::string(buf, static_cast<size_t>(n));
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
// What speculative decoding did at one context, and what its step costs
// imply: with each draft accepted at rate a, a step yields (1 - a^(K+1)) /
// (1 - a) tokens on average for the time of K drafts and one verify step.
std::string mtp_lines(const nlohmann::json& m, int64_t ctx, const nlohmann::json& plain_digest) {
  const int64_t k = m["drafts"].get<int64_t>();
  const double draft = m["draft_secs"].get<double>(), verify = m["verify_secs"].get<double>();
  const double plain = m["plain_step_secs"].get<double>();
  if (m["token_digest"] != plain_digest)
    throw Error("speculative decoding at context " + std::to_string(ctx) +
                " generated other tokens than plain decoding: a bug, please report it");
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "mtp %lld @ d%lld: %.1f t/s, %.2f tokens a step, acceptance %.2f (same tokens as plain decoding)\n"
                "  step costs (medians): plain %.2f ms; %lld drafts %.2f ms + verify of %lld rows %.2f ms (%.2fx a "
                "plain step)\n  implied speed at acceptance",
                static_cast<long long>(k), static_cast<long long>(ctx), m["tok_s"].get<double>(),
                m["tokens_per_step"].get<double>(), m["acceptance_rate"].get<double>(), 1e3 * plain,
                static_cast<long long>(k), 1e3 * draft, static_cast<long long>(k + 1), 1e3 * verify, verify / plain);
  out += buf;
  for (double a : {0.5, 0.7, 0.9}) {
    const double tokens = (1 - std::pow(a, static_cast<double>(k + 1))) / (1 - a);
    std::snprintf(buf, sizeof buf, " %.1f: %.1f t/s (%.2fx);", a, tokens / (draft + verify), plain * tokens / (draft + verify));
    out += buf;
  }
  out.back() = '\n';
  return out;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  struct Opts {
    std::string model, contexts = "256,512,1024,2048,4096", json;
    int64_t decode_steps = 64, child = 0, mtp = 0;
    CpuFlags cpu;
    DeviceFlag device;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("bench", "prefill and decode speed by context (batch 1, greedy, fresh process each)");
  sub->add_option("--model", o->model, "model directory")->required();
  sub->add_option("--contexts", o->contexts, "comma-separated prompt lengths");
  sub->add_option("--decode-steps", o->decode_steps, "measured decode steps")->check(CLI::PositiveNumber);
  sub->add_option("--json", o->json, "write the full report here");
  sub->add_option("--mtp", o->mtp,
                  "also decode with K drafts a step from the MTP head, verified in one step: acceptance, tokens a "
                  "step, speed, and the verify step's cost against a plain one")
      ->check(CLI::Range(1, 8));
  o->cpu.add_to(sub);
  o->device.add_to(sub);
  sub->add_option("--child", o->child, "run one configuration in this process (used by bench itself)")->group("");
  return {sub, [o]() {
            o->cpu.apply();
            if (o->child > 0) {
              auto model = Model::load(o->model);
              auto backend = o->device.backend(&o->cpu);
              nlohmann::json r = run_bench(*model, o->child, o->decode_steps, backend, o->mtp).to_json();
              // measured here, right after the decode it is the roofline of: on a
              // shared machine the bandwidth one gets moves from minute to minute
              r["read_bandwidth_gb_s"] = backend->read_bandwidth() / 1e9;
              r["device"] = backend->describe();
              std::cout << r.dump() << "\n";
              return 0;
            }
            const cpu::CpuContext cpu_context = cpu::make_cpu_context(o->cpu.options());  // what the children run
            const int threads = cpu_context.threads().size();
            set_residency(Residency::Mapped);  // this process only reads the sizes
            set_read_ahead(false);
            std::vector<int64_t> contexts;
            for (int32_t c : parse_token_list(o->contexts)) {
              if (c <= 0) throw Error("--contexts: lengths must be positive");
              contexts.push_back(c);
            }
            auto model = Model::load(o->model);  // validates, and sizes the roofline
            nlohmann::json report = {{"schema_version", 1},
                                     {"model", o->model},
                                     {"threads", threads},
                                     {"int8_activations", cpu_context.int8},
                                     {"cpu_isa", cpu::isa_name(cpu_context.isa)},
                                     {"no_mmap", o->cpu.no_mmap},
                                     {"weight_bytes", model->report().weight_bytes},
                                     {"results", nlohmann::json::array()}};
            std::printf("| model | size | params | threads | test | t/s | roofline |\n|---|---:|---:|---:|---|---:|---:|\n");
            const double gib = static_cast<double>(model->report().weight_bytes) / (1u << 30);
            const double params = static_cast<double>(model->report().parameters) / 1e9;
            double bw_lo = 1e300, bw_hi = 0;
            std::vector<std::string> steps;  // a device's decode step: operations and the host's share
            std::vector<std::string> spec;   // speculative decoding, per context
            for (int64_t ctx : contexts) {
              const std::string cmd = quote(self_path()) + " bench --model " + quote(o->model) + " --child " +
                                      std::to_string(ctx) + " --decode-steps " + std::to_string(o->decode_steps) +
                                      (o->mtp > 0 ? " --mtp " + std::to_string(o->mtp) : std::string()) +
                                      o->cpu.as_args() +
                                      o->device.as_args();
              std::FILE* p = ::popen(cmd.c_str(), "r");
              if (!p) throw Error("cannot start a benchmark process");
              std::string out;
              char buf[4096];
              size_t n;
              while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
              if (::pclose(p) != 0) throw Error("the benchmark process for context " + std::to_string(ctx) + " failed");
              nlohmann::json r = nlohmann::json::parse(out);
              const double bw = r["read_bandwidth_gb_s"].get<double>() * 1e9;
              bw_lo = std::min(bw_lo, bw), bw_hi = std::max(bw_hi, bw);
              const double bytes = static_cast<double>(model->decode_bytes_per_token(ctx));
              const double decode = r["decode"]["tok_s"].get<double>();
              r["decode"]["bytes_per_token"] = bytes;
              r["decode"]["roofline_fraction"] = bytes * decode / bw;
              report["results"].push_back(r);
              std::printf("| %s | %.2f GiB | %.2f B | %d | pp%lld | %.1f | |\n", o->model.c_str(), gib, params, threads,
                          static_cast<long long>(ctx), r["prefill"]["tok_s"].get<double>());
              std::printf("| %s | %.2f GiB | %.2f B | %d | tg%lld @ d%lld | %.1f | %.0f%% |\n", o->model.c_str(), gib,
                          params, threads, static_cast<long long>(o->decode_steps), static_cast<long long>(ctx), decode,
                          100.0 * bytes * decode / bw);
              if (r.contains("mtp")) spec.push_back(mtp_lines(r["mtp"], ctx, r["decode"]["token_digest"]));
              std::fflush(stdout);
              const auto& d = r["decode"];
              if (const uint64_t ops = d.value("step_device_operations", uint64_t{0}); ops > 0) {
                std::vector<double> walls = d["step_wall_secs"].get<std::vector<double>>();
                std::nth_element(walls.begin(), walls.begin() + walls.size() / 2, walls.end());
                char line[256];
                std::snprintf(line, sizeof line, "decode step @ d%lld: %llu device operations, host busy %.3f ms of %.3f ms",
                              static_cast<long long>(ctx), static_cast<unsigned long long>(ops),
                              1e3 * d["step_host_secs"].get<double>(), 1e3 * walls[walls.size() / 2]);
                steps.push_back(line);
              }
            }
            if (!spec.empty()) std::printf("\n");
            for (const std::string& block : spec) std::printf("%s", block.c_str());
            if (!steps.empty()) std::printf("\n");
            for (const std::string& line : steps) std::printf("%s (medians)\n", line.c_str());
            const std::string how = o->device.device() == Device::Cuda ? "on " + report["results"].back().value("device", std::string("cuda")) : o->cpu.describe();
            std::printf("\nread bandwidth: %.1f-%.1f GB/s (%d threads, measured after each decode); %s\n", bw_lo / 1e9,
                        bw_hi / 1e9, threads, how.c_str());
            if (!o->json.empty()) std::ofstream(o->json) << report.dump(2) << "\n";
            return 0;
          }};
}

}  // namespace lily::cli
