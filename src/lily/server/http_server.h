// `lily serve`: the APIs over lily::http::Server: OpenAI's Chat Completions,
// Completions and Responses, Anthropic's Messages and Ollama's, all on one
// engine, scheduler and prefix cache. It listens at once and answers /health
// with 503 while the model loads, then 200. Requests are checked and turned
// into jobs for the Scheduler; answers go back whole or streamed in each
// API's shape (answer_format.h). Nothing here computes: the engine does.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "lily/router/hybrid_router.h"
#include "lily/runtime/engine.h"
#include "lily/runtime/scheduler.h"
#include "lily/server/answer_format.h"
#include "lily/server/http/server.h"
#include "lily/server/openai_request.h"
#include "lily/server/response_store.h"

namespace lily::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;  // empty: no authentication
  size_t max_body_bytes = size_t(16) << 20;
  bool cors = false;
  std::string cors_origin = "*";
  double request_timeout_s = 600;          // a request still running after this ends with an error
  int64_t context = 0;                     // longest prompt + answer, in tokens (0: the model's maximum)
  std::string model_name;                  // the id in /v1/models (default: the model directory's name)
  bool special_tokens_in_content = false;  // text in messages may spell control tokens (Engine::chat_prompt)
  size_t stored_responses = 1024;          // Responses API: finished responses kept for previous_response_id
  size_t stored_response_bytes = size_t(256) << 20;
  SchedulerOptions scheduler;
  http::ServerLimits http;  // connections, deadlines (max_body_bytes above sets the body limit)
  // The hybrid routing policy (--deployment-config): null serves everything here.
  std::shared_ptr<router::HybridRouter> router;

  // context when it was left 0: the model's max_position_embeddings, else 32768
  void resolve_context(const ModelConfig& cfg);
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions opt);
  ~HttpServer();

  // Binds the port (0: any free one), then loads the model with `load` while
  // /health answers 503, then serves until stop(). `load` may settle the
  // options that depend on the model (context, cache size). Throws
  // lily::Error when the address cannot be bound or the model cannot be loaded.
  void run(const std::function<std::unique_ptr<Engine>(ServerOptions&)>& load,
           const std::function<void(int port)>& on_listening = nullptr);
  void stop();
  int port() const { return port_; }

 private:
  void routes();
  void ollama_routes();
  std::string metrics() const;
  // Submits `api` to the scheduler and answers through `format`, whole or
  // streamed; a routed request's answer says it ran here.
  void answer(const http::Request& req, http::Response& res, std::shared_ptr<const ApiRequest> api,
              std::shared_ptr<AnswerFormat> format, bool routed = false);
  // With a routing policy: classifies and decides (nullopt without one).
  std::optional<router::Routed> route(const http::Request& req, const nlohmann::ordered_json& body,
                                      const std::string& api, bool cloud_capable);
  // Answers a request the policy sent to the cloud tier; false when the call
  // failed and the policy says to answer here instead.
  bool relay(http::Response& res, const nlohmann::ordered_json& body, const router::Routed& r, bool stream);

  ServerOptions opt_;
  std::unique_ptr<http::Server> http_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
  ResponseStore responses_;
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> http_errors_{0};
  int port_ = 0;
};

}  // namespace lily::server
