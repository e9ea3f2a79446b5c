#include "server/client_connection.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include <netdb.h>
#include <sys/socket.h>

namespace deferkv::server {
namespace {

// The numeric host and port of a socket address, as httplib writes them.
bool host_and_port(const sockaddr_storage& address, socklen_t size, std::string& host, int& port) {
  char h[NI_MAXHOST];
  char p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), size, h, sizeof h, p, sizeof p,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = h;
  port = std::atoi(p);
  return true;
}

bool is_connection(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) return false;  // not a socket
  if (address.ss_family != AF_INET && address.ss_family != AF_INET6) return false;
  if (!host_and_port(address, size, host, port) || port != local_port || host != local_addr) return false;
  size = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) return false;  // a listening socket
  return host_and_port(address, size, host, port) && port == remote_port && host == remote_addr;
}

}  // namespace

ClientConnection::ClientConnection(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      local_port_(local_port),
      remote_addr_(std::move(remote_addr)),
      remote_port_(remote_port) {}

void ClientConnection::find_socket() {
  searched_ = true;
  // The connection stays open while its request's handler runs, so its descriptor cannot
  // be closed and reused under this scan; a descriptor another thread opens or closes
  // meanwhile fails a test above and is skipped.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    if (is_connection(fd, local_addr_, local_port_, remote_addr_, remote_port_)) {
      socket_ = fd;
      return;
    }
  }
}

bool ClientConnection::closed() {
  if (!searched_) find_socket();
  if (socket_ < 0) return false;
  char byte = 0;
  const ssize_t n = recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;  // end of file: the client shut its side
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace deferkv::server
