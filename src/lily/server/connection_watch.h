// Tells whether an HTTP client is still there. cpp-httplib 0.11 gives a
// handler no way to learn that its client hung up, and a generation whose
// client is gone must stop and free its state; so the request's socket is
// found by its two addresses and peeked at without reading from it.
#pragma once

#include <string>

namespace lily::server {

class ConnectionWatch {
 public:
  ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port);
  // True once the peer has closed or reset the connection. A socket that
  // could not be found is taken as open (the write that fails will tell).
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace lily::server
