#include "lily/server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "lily/error.h"
#include "lily/runtime/memory_plan.h"
#include "lily/server/api_error.h"
#include "lily/server/connection_watch.h"
#include "lily/server/openai_request.h"
#include "lily/server/openai_response.h"

namespace lily::server {

void ServerOptions::resolve_context(const ModelConfig& cfg) {
  if (context <= 0) context = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 32768;
}

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

json parse_body(const httplib::Request& req) {
  try {
    return json::parse(req.body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

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

}  // namespace

HttpServer::HttpServer(ServerOptions opt) : opt_(std::move(opt)), http_(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() {
  stop();
  scheduler_.reset();  // ends running jobs before the engine goes
}

void HttpServer::stop() {
  if (http_) http_->stop();
}

void HttpServer::run(const std::function<std::unique_ptr<Engine>(ServerOptions&)>& load,
                     const std::function<void(int)>& on_listening) {
  const size_t threads = opt_.scheduler.max_sequences + opt_.scheduler.max_queue + 8;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(opt_.max_body_bytes);
  http_->set_read_timeout(60, 0);
  http_->set_write_timeout(60, 0);
  // SO_REUSEADDR (restart while old connections linger) but not httplib's
  // default SO_REUSEPORT, which would let a second server share the port.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof yes);
  });
  routes();
  port_ = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port_ < 0) throw Error("cannot listen on " + opt_.host + ":" + std::to_string(opt_.port) + " (in use, or not an address of this machine)");
  std::thread listener([this] { http_->listen_after_bind(); });
  // stop() only reaches a loop that has started
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
  metric("prefix_cache_hits_total", "counter", "requests that resumed from a cached prefix", static_cast<double>(s.cache.hits));
  metric("prefix_cache_misses_total", "counter", "requests that found no cached prefix", static_cast<double>(s.cache.misses));
  metric("prefix_cache_evictions_total", "counter", "cached states dropped for space", static_cast<double>(s.cache.evictions));
  metric("prefix_cache_entries", "gauge", "cached states", static_cast<double>(s.cache.entries));
  metric("prefix_cache_bytes", "gauge", "bytes held by cached states", static_cast<double>(s.cache.bytes));
  return m.str();
}

void HttpServer::routes() {
  httplib::Server& h = *http_;

  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.cors) {
      res.set_header("Access-Control-Allow-Origin", opt_.cors_origin);
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      if (req.method == "OPTIONS") {
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!opt_.api_key.empty() && req.path != "/health" &&
        req.get_header_value("Authorization") != "Bearer " + opt_.api_key) {
      send_error(res, ApiError(401, "invalid or missing API key (Authorization: Bearer ...)", "authentication_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is larger than the server accepts (--max-body)"
                                          : "HTTP error " + std::to_string(res.status);
    send_json(res, res.status, ApiError(res.status, msg).body());
  });
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    send_json(res, 500, ApiError(500, msg, "server_error").body());
  });
  h.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    if (res.status >= 400) ++http_errors_;
  });

  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_) send_json(res, 200, {{"status", "ok"}});
    else send_json(res, 503, ApiError(503, "the model is loading", "unavailable_error").body());
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });

  // Everything below needs the model.
  auto with_model = [this](auto&& handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!ready_) throw ApiError(503, "the model is loading", "unavailable_error");
        handler(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    };
  };
  h.Get("/v1/models", with_model([this](const httplib::Request&, httplib::Response& res) {
          send_json(res, 200,
                    {{"object", "list"},
                     {"data", json::array({{{"id", opt_.model_name}, {"object", "model"}, {"created", 0},
                                            {"owned_by", "lily"}}})}});
        }));
  h.Post("/tokenize", with_model([this](const httplib::Request& req, httplib::Response& res) {
           const json body = parse_body(req);
           if (!body.is_object() || !body.contains("content") || !body["content"].is_string())
             throw bad_field("content", "must be a string");
           send_json(res, 200, {{"tokens", engine_->tokenizer().encode(body["content"].get<std::string>())}});
         }));
  h.Post("/detokenize", with_model([this](const httplib::Request& req, httplib::Response& res) {
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

  auto generation = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      const json body = parse_body(req);
      auto api = std::make_shared<ApiRequest>(chat ? parse_chat_request(body, *engine_)
                                                   : parse_completion_request(body, *engine_));
      const int64_t prompt = static_cast<int64_t>(api->prompt.size()), ctx = opt_.context;
      if (prompt >= ctx)
        throw ApiError(400, "the prompt has " + std::to_string(prompt) + " tokens, but the context is " +
                                std::to_string(ctx) + " tokens (--ctx-size) and the answer needs at least one");
      if (api->max_tokens && prompt + *api->max_tokens > ctx)
        throw ApiError(400, "the prompt has " + std::to_string(prompt) + " tokens and max_tokens is " +
                                std::to_string(*api->max_tokens) + ": together more than the context of " +
                                std::to_string(ctx) + " tokens (--ctx-size)",
                       "invalid_request_error", "max_tokens");
      Job job;
      job.prompt = api->prompt;
      job.params = api->params;
      job.params.max_tokens = api->max_tokens.value_or(ctx - prompt);
      job.deadline = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(opt_.request_timeout_s * 1000));
      std::shared_ptr<Ticket> ticket;
      try {
        ticket = scheduler_->submit(std::move(job));
      } catch (const QueueFull& e) {
        throw ApiError(503, e.what(), "server_busy");
      }
      auto watch = std::make_shared<ConnectionWatch>(req.remote_addr, req.remote_port, req.local_port);
      auto answer = std::make_shared<AnswerBuilder>(*api, *engine_, opt_.model_name);
      const double timeout_s = opt_.request_timeout_s;

      if (api->stream) {
        res.set_header("Cache-Control", "no-cache");
        // The provider runs after this handler returns: it holds the request
        // (which the answer builder reads), the ticket and the watch itself.
        res.set_chunked_content_provider(
            "text/event-stream",
            [api, ticket, watch, answer, timeout_s](size_t, httplib::DataSink& sink) {
              auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
              JobEvent ev;
              for (;;) {
                if (!ticket->next(ev, 100ms)) {
                  if (watch->closed()) break;
                  continue;
                }
                if (auto err = failure_of(ev, timeout_s)) {
                  write(sse(err->body()));
                  write("data: [DONE]\n\n");
                  sink.done();
                  return true;
                }
                bool ok = true;
                for (const json& c : answer->chunks(ev)) ok = ok && write(sse(c));
                if (ev.kind == JobEvent::Kind::Done) {
                  for (const json& c : answer->closing_chunks(ev)) ok = ok && write(sse(c));
                  ok = ok && write("data: [DONE]\n\n");
                  if (ok) sink.done();
                  return ok;
                }
                if (!ok) break;
              }
              ticket->cancel();  // the client went away: stop generating and free the sequence
              return false;
            },
            [ticket](bool success) {
              if (!success) ticket->cancel();
            });
        return;
      }
      JobEvent ev;
      for (;;) {
        if (!ticket->next(ev, 100ms)) {
          if (watch->closed()) {
            ticket->cancel();
            return;
          }
          continue;
        }
        if (auto err = failure_of(ev, timeout_s)) throw *err;
        answer->chunks(ev);
        if (ev.kind == JobEvent::Kind::Done) break;
      }
      send_json(res, 200, answer->response(ev));
    };
  };
  h.Post("/v1/chat/completions", with_model(generation(true)));
  h.Post("/v1/completions", with_model(generation(false)));
}

}  // namespace lily::server
