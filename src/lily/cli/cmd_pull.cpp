// `lily pull REPO [--revision R] [--include GLOB]`: downloads a Hugging Face
// repository into the Hugging Face cache, where `lily run --model REPO` (and
// transformers, mlx and the `hf` CLI) find it offline. The only command that
// downloads anything.
#include <unistd.h>

#include <iostream>

#include "lily/cli/commands.h"
#include "lily/hub/progress.h"
#include "lily/hub/pull.h"
#include "lily/io/hf_cache.h"

namespace lily::cli {

Command add_pull_command(CLI::App& app) {
  struct Opts {
    std::string repo, revision = "main";
    std::vector<std::string> include;
    int jobs = 8;
    double idle_timeout_s = 60;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "pull", "download a Hugging Face model repository into the Hugging Face cache (HF_TOKEN, HF_ENDPOINT, HF_HUB_CACHE)");
  sub->add_option("repo", o->repo, "the repository, Org/Name (e.g. Qwen/Qwen3.6-35B-A3B)")->required();
  sub->add_option("--revision", o->revision, "a branch, tag or commit (default: main)");
  sub->add_option("--include", o->include,
                  "only files whose path matches this glob (repeatable), e.g. '*Q4_K_M*.gguf' for a GGUF repository");
  sub->add_option("--jobs", o->jobs, "files downloaded at once")->check(CLI::Range(1, 64));
  sub->add_option("--idle-timeout", o->idle_timeout_s, "seconds without a byte before a transfer is retried")
      ->check(CLI::PositiveNumber);
  return {sub, [o]() {
            hub::PullOptions p;
            p.repo = o->repo;
            p.revision = o->revision;
            p.include = o->include;
            p.endpoint = hub::default_endpoint();
            p.token = hub::default_token();
            p.cache = hf_cache::cache_dir();
            p.jobs = o->jobs;
            p.idle_timeout_s = o->idle_timeout_s;
            hub::Progress progress(std::cerr, ::isatty(STDERR_FILENO) == 1);
            const hub::PullResult r = hub::pull(p, progress);
            std::cerr << o->repo << " at " << r.commit.substr(0, 12) << ": " << r.files << " file"
                      << (r.files == 1 ? "" : "s") << " (" << r.already << " already there), "
                      << hub::Progress::human_bytes(double(r.bytes_fetched)) << " downloaded\n";
            std::cout << r.snapshot.string() << "\n";
            return 0;
          }};
}

}  // namespace lily::cli
