#pragma once
// The TCP connection a request came on, to tell whether its client has gone while the
// request runs. cpp-httplib 0.11 (Debian's) hands a handler neither its socket nor a
// "connection closed" test, so the socket is found among the process's descriptors by
// the connection's two addresses, which the request carries.
#include <string>

namespace deferkv::server {

class ClientConnection {
 public:
  // The connection from remote_addr:remote_port to local_addr:local_port (addresses as
  // getnameinfo writes them numerically, as httplib fills in the request). Its socket is
  // looked up at the first closed(), so that a request done sooner costs no scan.
  ClientConnection(std::string local_addr, int local_port, std::string remote_addr, int remote_port);

  // True once the client has closed or reset the connection: a read would return end of
  // file or an error. Bytes it sent ahead (a pipelined request) do not count. Does not
  // block. A socket not found (should not happen while the request's handler runs): false.
  bool closed();

 private:
  void find_socket();

  std::string local_addr_;
  int local_port_;
  std::string remote_addr_;
  int remote_port_;
  bool searched_ = false;
  int socket_ = -1;
};

}  // namespace deferkv::server
