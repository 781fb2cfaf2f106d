#include "lily/server/http_server.h"

#include <strings.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/runtime/memory_plan.h"
#include "lily/server/api_dialect.h"
#include "lily/server/api_error.h"
#include "lily/server/messages_api.h"
#include "lily/server/ollama_api.h"
#include "lily/server/openai_request.h"
#include "lily/server/openai_response.h"
#include "lily/server/responses_api.h"
#include "lily/server/web/chat_page.h"
#include "lily/version.h"

namespace lily::server {

void ServerOptions::resolve_context(const ModelConfig& cfg) {
  if (context <= 0) context = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 32768;
}

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(http::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(http::Response& res, Dialect d, const ApiError& e) { send_json(res, e.status(), error_body(d, e)); }

json parse_body(const http::Request& req) {
  try {
    check_json_depth(req.body, "the request body");
    return json::parse(req.body);
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
}

// "Authorization: Bearer KEY", the scheme in any case (RFC 9110 11.1);
// Anthropic's clients send "x-api-key: KEY" instead.
bool key_matches(const http::Request& req, const std::string& key) {
  if (dialect_of(req.path) == Dialect::Anthropic && req.header("x-api-key").value_or("") == key) return true;
  const std::string_view v = req.header("authorization").value_or("");
  if (v.size() < 7 || ::strncasecmp(v.data(), "bearer ", 7) != 0) return false;
  std::string_view token = v.substr(7);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  return token == key;
}

// What a finished job means for the client when it did not end normally.
std::optional<ApiError> failure_of(const JobEvent& ev, double timeout_s) {
  if (ev.kind == JobEvent::Kind::Failed) return ApiError(500, "generation failed: " + ev.error, "server_error");
  if (ev.finish_reason == "timeout") {
    std::ostringstream s;
    s << "the request ran past the server's limit of " << timeout_s << " s (--timeout)";
    return ApiError(504, s.str(), "timeout_error");
  }
  return std::nullopt;
}

// A handler that needs the model: 503 while it loads, and an ApiError
// answered in the shape of the path's API.
template <class Handler>
http::Handler guarded(const std::atomic<bool>& ready, Handler handler) {
  return [&ready, handler](const http::Request& req, http::Response& res) {
    try {
      if (!ready) throw ApiError(503, "the model is loading", "unavailable_error");
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, dialect_of(req.path), e);
    }
  };
}

}  // namespace

namespace {
http::ServerLimits limits_of(const ServerOptions& opt) {
  http::ServerLimits l = opt.http;
  l.parser.max_body_bytes = opt.max_body_bytes;
  return l;
}
}  // namespace

HttpServer::HttpServer(ServerOptions opt)
    : opt_(std::move(opt)),
      http_(std::make_unique<http::Server>(limits_of(opt_))),
      responses_(opt_.stored_responses, opt_.stored_response_bytes) {}

HttpServer::~HttpServer() {
  stop();
  scheduler_.reset();  // ends running jobs before the engine goes
}

void HttpServer::stop() {
  if (http_) http_->stop();
}

void HttpServer::run(const std::function<std::unique_ptr<Engine>(ServerOptions&)>& load,
                     const std::function<void(int)>& on_listening) {
  routes();
  port_ = http_->bind(opt_.host, opt_.port);
  std::thread listener([this] { http_->run(); });
  if (on_listening) on_listening(port_);
  try {
    engine_ = load(opt_);
    opt_.resolve_context(engine_->model().config());
    if (opt_.model_name.empty()) opt_.model_name = std::filesystem::path(engine_->dir()).filename().string();
    scheduler_ = std::make_unique<Scheduler>(*engine_, opt_.scheduler);
  } catch (...) {
    http_->stop();
    listener.join();
    throw;
  }
  ready_ = true;
  listener.join();
}

std::string HttpServer::metrics() const {
  std::ostringstream m;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    m << "# HELP lily_" << name << " " << help << "\n# TYPE lily_" << name << " " << type << "\nlily_" << name << " "
      << value << "\n";
  };
  metric("ready", "gauge", "1 once the model is loaded", ready_ ? 1 : 0);
  metric("http_errors_total", "counter", "requests answered with an error status", static_cast<double>(http_errors_));
  if (opt_.router) {
    const router::HybridRouter::Counts c = opt_.router->counts();
    metric("route_local_total", "counter", "routed requests answered on this machine", static_cast<double>(c.local));
    metric("route_cloud_total", "counter", "requests answered by the cloud tier", static_cast<double>(c.cloud));
    metric("route_cloud_failed_total", "counter", "calls to the cloud tier that failed",
           static_cast<double>(c.cloud_failed));
    metric("route_fallback_local_total", "counter", "cloud requests answered locally after a failure",
           static_cast<double>(c.fallback_local));
    metric("egress_bytes_sent_total", "counter", "bytes sent to the cloud tier", static_cast<double>(c.bytes_sent));
    metric("egress_bytes_received_total", "counter", "bytes received from the cloud tier",
           static_cast<double>(c.bytes_received));
  }
  if (!scheduler_) return m.str();
  const Scheduler::Stats s = scheduler_->stats();
  metric("requests_total", "counter", "generation requests accepted", static_cast<double>(s.requests));
  metric("requests_running", "gauge", "requests prefilling or decoding", static_cast<double>(s.running));
  metric("requests_queued", "gauge", "requests waiting for a sequence slot", static_cast<double>(s.queued));
  metric("prompt_tokens_total", "counter", "prompt tokens of accepted requests", static_cast<double>(s.prompt_tokens));
  metric("prompt_tokens_cached_total", "counter", "prompt tokens resumed from the prefix cache",
         static_cast<double>(s.cached_tokens));
  metric("generated_tokens_total", "counter", "tokens generated", static_cast<double>(s.generated_tokens));
  metric("decode_steps_total", "counter", "batched decode steps", static_cast<double>(s.decode_steps));
  metric("prefill_tokens_per_second", "gauge", "prompt tokens computed per second of prefill",
         s.prefill_seconds > 0 ? static_cast<double>(s.prompt_tokens - s.cached_tokens) / s.prefill_seconds : 0);
  metric("decode_tokens_per_second", "gauge", "tokens generated per second of decoding (all streams)",
         s.decode_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.decode_seconds : 0);
  metric("prefix_cache_hits_total", "counter", "requests that resumed from a cached prefix",
         static_cast<double>(s.cache.hits));
  metric("prefix_cache_misses_total", "counter", "requests that found no cached prefix",
         static_cast<double>(s.cache.misses));
  metric("prefix_cache_evictions_total", "counter", "cached states dropped for space",
         static_cast<double>(s.cache.evictions));
  metric("prefix_cache_entries", "gauge", "cached states", static_cast<double>(s.cache.entries));
  metric("prefix_cache_bytes", "gauge", "bytes held by cached states", static_cast<double>(s.cache.bytes));
  return m.str();
}

std::optional<router::Routed> HttpServer::route(const http::Request& req, const json& body, const std::string& api,
                                                bool cloud_capable) {
  if (!opt_.router) return std::nullopt;
  try {
    return opt_.router->route(body, std::string(req.header("x-lily-route").value_or("")), api, cloud_capable);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "lily_routing");
  }
}

bool HttpServer::relay(http::Response& res, const json& body, const router::Routed& r, bool stream) {
  router::HybridRouter& rt = *opt_.router;
  std::shared_ptr<router::EgressCall> call = rt.start_cloud(r, body);
  std::string whole;
  const bool answered = call->ok() && (stream || call->read_body([&](std::string_view d) {
                                         whole.append(d);
                                         return true;
                                       }));
  json parsed;
  if (answered && !stream) {
    parsed = json::parse(whole, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      rt.finish_cloud(r, *call, "the answer was not a JSON object");
      throw ApiError(502, "the cloud tier answered with something other than a JSON object", "server_error");
    }
  }
  if (!answered) {
    const router::EgressResult& e = call->result();
    std::string why = !e.error.empty() ? e.error : "it answered HTTP " + std::to_string(e.status);
    if (e.error.empty() && e.status) {  // keep the start of its error body for the message
      std::string detail;
      call->read_body([&](std::string_view d) {
        detail.append(d.substr(0, 512 - std::min<size_t>(512, detail.size())));
        return detail.size() < 512;
      });
      if (!detail.empty()) why += ": " + detail;
    }
    if (rt.config().on_cloud_failure == router::CloudFailure::Local) {
      rt.finish_cloud(r, *call, "failed (" + why + "); answered locally");
      rt.count_fallback();
      return false;
    }
    rt.finish_cloud(r, *call, "failed (" + why + "); answered with an error");
    throw ApiError(502, "the cloud tier failed: " + why, "server_error");
  }
  res.set_header("x-lily-route", "cloud");
  if (!stream) {
    parsed["lily_route"] = "cloud";
    rt.finish_cloud(r, *call, "relayed");
    send_json(res, 200, parsed);
    return true;
  }
  res.set_header("Cache-Control", "no-cache");
  res.content_type = call->result().content_type.empty() ? "text/event-stream" : call->result().content_type;
  std::shared_ptr<router::HybridRouter> keep = opt_.router;
  res.stream = [call, keep, r](http::StreamSink& sink) {
    bool client_left = false;
    call->read_body([&](std::string_view d) { return (client_left = !sink.write(d)) == false; });
    const std::string& err = call->result().error;
    keep->finish_cloud(r, *call,
                       client_left ? "relayed until the client went away"
                       : err.empty() ? "relayed"
                                     : "relay broke off: " + err);
  };
  return true;
}

void HttpServer::answer(const http::Request& req, http::Response& res, std::shared_ptr<const ApiRequest> api,
                        std::shared_ptr<AnswerFormat> format, bool routed) {
  const int64_t prompt = static_cast<int64_t>(api->prompt.size()), ctx = opt_.context;
  if (prompt >= ctx)
    throw ApiError(400, "the prompt has " + std::to_string(prompt) + " tokens, but the context is " +
                            std::to_string(ctx) + " tokens (--ctx-size) and the answer needs at least one");
  if (api->max_tokens && prompt + *api->max_tokens > ctx)
    throw ApiError(400, "the prompt has " + std::to_string(prompt) + " tokens and the answer may have " +
                            std::to_string(*api->max_tokens) + ": together more than the context of " +
                            std::to_string(ctx) + " tokens (--ctx-size)");
  Job job;
  job.prompt = api->prompt;
  job.params = api->params;
  job.params.max_tokens = api->max_tokens.value_or(ctx - prompt);
  job.deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt_.request_timeout_s * 1000));
  std::shared_ptr<Ticket> ticket;
  try {
    ticket = scheduler_->submit(std::move(job));
  } catch (const QueueFull& e) {
    throw ApiError(503, e.what(), "server_busy");
  }
  const double timeout_s = opt_.request_timeout_s;
  if (routed) res.set_header("x-lily-route", "local");

  if (api->stream) {
    res.set_header("Cache-Control", "no-cache");
    res.content_type = format->stream_content_type();
    // The stream runs after this handler returns: it holds the request (the
    // format reads it) and the ticket itself.
    res.stream = [api, ticket, format, timeout_s](http::StreamSink& sink) {
      JobEvent ev;
      for (;;) {
        if (!ticket->next(ev, 100ms)) {
          if (sink.client_gone()) break;
          continue;
        }
        if (auto err = failure_of(ev, timeout_s)) {
          sink.write(format->error_frames(*err));
          return;
        }
        const std::string out = format->frames(ev);
        const bool ok = out.empty() || sink.write(out);
        if (ev.kind == JobEvent::Kind::Done) return;
        if (!ok) break;
      }
      ticket->cancel();  // the client went away: stop generating and free the sequence
    };
    return;
  }
  JobEvent ev;
  for (;;) {
    if (!ticket->next(ev, 100ms)) {
      if (req.client_gone()) {
        ticket->cancel();
        return;
      }
      continue;
    }
    if (auto err = failure_of(ev, timeout_s)) throw *err;
    format->frames(ev);
    if (ev.kind == JobEvent::Kind::Done) break;
  }
  json whole = format->whole(ev);
  if (routed && whole.is_object()) whole["lily_route"] = "local";
  send_json(res, 200, whole);
}

void HttpServer::routes() {
  http::Server& h = *http_;

  h.set_pre_routing([this](const http::Request& req, http::Response& res) {
    if (opt_.cors) {
      res.set_header("Access-Control-Allow-Origin", opt_.cors_origin);
      res.set_header("Access-Control-Allow-Headers",
                     "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      if (req.method == "OPTIONS") {
        res.status = 204;
        res.set_content("", "text/plain");
        return true;
      }
    }
    if (!opt_.api_key.empty() && req.path != "/health" && req.path != "/" && !key_matches(req, opt_.api_key)) {
      const Dialect d = dialect_of(req.path);
      send_error(
          res, d,
          ApiError(401,
                   d == Dialect::Anthropic ? "invalid or missing API key (x-api-key: ... or Authorization: Bearer ...)"
                                           : "invalid or missing API key (Authorization: Bearer ...)",
                   "authentication_error"));
      return true;
    }
    return false;
  });
  h.set_error_body([](int status, const std::string& message, std::string_view path, http::Response& res) {
    send_json(res, status, error_body(dialect_of(path), ApiError(status, message, openai_error_type(status))));
  });
  h.set_logger([this](const http::Request&, const http::Response& res) {
    if (res.status >= 400) ++http_errors_;
  });

  h.route("GET", "/", [](const http::Request&, http::Response& res) {
    res.set_header("Content-Security-Policy", kChatPagePolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_content(std::string(kChatPage), "text/html; charset=utf-8");
  });
  h.route("GET", "/health", [this](const http::Request&, http::Response& res) {
    if (ready_)
      send_json(res, 200, {{"status", "ok"}});
    else
      send_json(res, 503, ApiError(503, "the model is loading", "unavailable_error").body());
  });
  h.route("GET", "/metrics", [this](const http::Request&, http::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });

  // Everything below needs the model.
  auto with_model = [this](auto&& handler) { return guarded(ready_, handler); };
  auto model_object = [this] {
    return json{{"id", opt_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "lily"}};
  };
  h.route("GET", "/v1/models", with_model([model_object](const http::Request&, http::Response& res) {
            send_json(res, 200, {{"object", "list"}, {"data", json::array({model_object()})}});
          }));
  h.route("GET", "/v1/models/*", with_model([this, model_object](const http::Request& req, http::Response& res) {
            const std::string id = req.path.substr(std::string("/v1/models/").size());
            if (id != opt_.model_name)
              throw ApiError(404, "the model '" + id + "' does not exist (this server has '" + opt_.model_name + "')",
                             "invalid_request_error", "model");
            send_json(res, 200, model_object());
          }));
  h.route("POST", "/tokenize", with_model([this](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            if (!body.is_object() || !body.contains("content") || !body["content"].is_string())
              throw bad_field("content", "must be a string");
            send_json(res, 200, {{"tokens", engine_->tokenizer().encode(body["content"].get<std::string>())}});
          }));
  h.route("POST", "/detokenize", with_model([this](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
              throw bad_field("tokens", "must be an array of token ids");
            std::vector<int32_t> ids;
            const int64_t V = engine_->model().config().vocab_size;
            for (const auto& t : body["tokens"]) {
              if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
                throw bad_field("tokens", "token ids must be integers from 0 to " + std::to_string(V - 1));
              ids.push_back(t.get<int32_t>());
            }
            send_json(res, 200, {{"content", engine_->tokenizer().decode_bytes(ids)}});
          }));

  // OpenAI Chat Completions and Completions.
  auto generation = [this](bool chat) {
    return [this, chat](const http::Request& req, http::Response& res) {
      const json body = parse_body(req);
      // Checked here first, so a malformed request is refused before anything leaves.
      auto api =
          std::make_shared<const ApiRequest>(chat ? parse_chat_request(body, *engine_, !opt_.special_tokens_in_content)
                                                  : parse_completion_request(body, *engine_));
      const auto routed = route(req, body, chat ? "chat.completions" : "completions", chat);
      if (routed && routed->decision.route == router::Route::Cloud && relay(res, body, *routed, api->stream)) return;
      answer(req, res, api, std::make_shared<AnswerBuilder>(*api, *engine_, opt_.model_name), routed.has_value());
    };
  };
  h.route("POST", "/v1/chat/completions", with_model(generation(true)));
  h.route("POST", "/v1/completions", with_model(generation(false)));

  // OpenAI Responses, with the stored responses a follow-up may name.
  h.route("POST", "/v1/responses", with_model([this](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            auto r = std::make_shared<const ResponsesRequest>(
                parse_responses_request(body, *engine_, responses_, !opt_.special_tokens_in_content));
            std::shared_ptr<const ApiRequest> api(r, &r->api);
            const bool routed = route(req, body, "responses", false).has_value();
            answer(req, res, api, std::make_shared<ResponsesFormat>(r, *engine_, opt_.model_name, &responses_), routed);
          }));
  auto stored_id = [](const http::Request& req) {
    const std::string id = req.path.substr(std::string("/v1/responses/").size());
    if (id.empty() || id.find('/') != std::string::npos) throw ApiError(404, "no such endpoint: " + req.path);
    return id;
  };
  h.route("GET", "/v1/responses/*", with_model([this, stored_id](const http::Request& req, http::Response& res) {
            const std::string id = stored_id(req);
            auto r = responses_.get(id);
            if (!r) throw ApiError(404, "no stored response has the id '" + id + "'");
            send_json(res, 200, r->response);
          }));
  h.route("DELETE", "/v1/responses/*", with_model([this, stored_id](const http::Request& req, http::Response& res) {
            const std::string id = stored_id(req);
            if (!responses_.erase(id)) throw ApiError(404, "no stored response has the id '" + id + "'");
            send_json(res, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
          }));

  // Anthropic Messages.
  h.route("POST", "/v1/messages", with_model([this](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            auto api = std::make_shared<const ApiRequest>(
                parse_messages_request(body, *engine_, !opt_.special_tokens_in_content));
            const bool routed = route(req, body, "messages", false).has_value();
            answer(req, res, api, std::make_shared<MessagesFormat>(api, opt_.model_name), routed);
          }));
  h.route("POST", "/v1/messages/count_tokens", with_model([this](const http::Request& req, http::Response& res) {
            const ApiRequest api =
                parse_messages_request(parse_body(req), *engine_, !opt_.special_tokens_in_content, true);
            send_json(res, 200, {{"input_tokens", api.prompt.size()}});
          }));

  ollama_routes();
}

void HttpServer::ollama_routes() {
  http::Server& h = *http_;
  auto with_model = [this](auto&& handler) { return guarded(ready_, handler); };
  // A request with nothing to answer only loads the model, which is loaded.
  auto loaded = [this](http::Response& res, bool chat) {
    json out = {{"model", opt_.model_name}, {"created_at", rfc3339_now()}};
    if (chat)
      out["message"] = {{"role", "assistant"}, {"content", ""}};
    else
      out["response"] = "";
    out["done"] = true;
    out["done_reason"] = "load";
    send_json(res, 200, out);
  };
  h.route("POST", "/api/chat", with_model([this, loaded](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            if (body.is_object() &&
                (!body.contains("messages") || (body["messages"].is_array() && body["messages"].empty())))
              return loaded(res, true);
            auto api =
                std::make_shared<const ApiRequest>(parse_ollama_chat(body, *engine_, !opt_.special_tokens_in_content));
            const bool routed = route(req, body, "ollama.chat", false).has_value();
            answer(req, res, api, std::make_shared<OllamaFormat>(api, opt_.model_name, true), routed);
          }));
  h.route("POST", "/api/generate", with_model([this, loaded](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            if (body.is_object() && body.value("prompt", json("")) == json("") && !body.contains("context"))
              return loaded(res, false);
            auto api = std::make_shared<const ApiRequest>(
                parse_ollama_generate(body, *engine_, !opt_.special_tokens_in_content));
            const bool routed = route(req, body, "ollama.generate", false).has_value();
            answer(req, res, api, std::make_shared<OllamaFormat>(api, opt_.model_name, false), routed);
          }));
  h.route("GET", "/api/tags", with_model([this](const http::Request&, http::Response& res) {
            send_json(res, 200, {{"models", json::array({ollama_model_entry(*engine_, opt_.model_name)})}});
          }));
  h.route("GET", "/api/ps", with_model([this](const http::Request&, http::Response& res) {
            json m = ollama_model_entry(*engine_, opt_.model_name);
            m["expires_at"] = "2318-01-01T00:00:00Z";  // kept loaded while the server runs
            m["size_vram"] = 0;
            m["context_length"] = opt_.context;
            send_json(res, 200, {{"models", json::array({m})}});
          }));
  h.route("POST", "/api/show", with_model([this](const http::Request& req, http::Response& res) {
            const json body = parse_body(req);
            const json* name = body.is_object() && body.contains("model")  ? &body["model"]
                               : body.is_object() && body.contains("name") ? &body["name"]
                                                                           : nullptr;
            if (!name || !name->is_string()) throw bad_field("model", "must be a string");
            if (!ollama_name_matches(name->get<std::string>(), opt_.model_name))
              throw ApiError(404, "model '" + name->get<std::string>() + "' not found (this server has '" +
                                      opt_.model_name + "')");
            send_json(res, 200, ollama_show(*engine_, opt_.model_name, opt_.context));
          }));
  h.route("GET", "/api/version", [](const http::Request&, http::Response& res) {
    send_json(res, 200, {{"version", kVersion}});
  });
  // What Ollama does and this engine does not: a clear 501, not a 404.
  for (const auto& [method, path] : {std::pair{"POST", "/api/embed"},
                                     {"POST", "/api/embeddings"},
                                     {"POST", "/api/pull"},
                                     {"POST", "/api/push"},
                                     {"POST", "/api/create"},
                                     {"POST", "/api/copy"},
                                     {"DELETE", "/api/delete"},
                                     {"POST", "/api/blobs/*"},
                                     {"HEAD", "/api/blobs/*"}})
    h.route(method, path, [](const http::Request& req, http::Response& res) {
      send_error(res, Dialect::Ollama,
                 ApiError(501, req.method + " " + req.path +
                                   " is not implemented: this server runs the one model it "
                                   "was started with (no embeddings, pulls, pushes or model management)"));
    });
}

}  // namespace lily::server
