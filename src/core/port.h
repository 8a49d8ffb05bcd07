// The port argument of rpma_ep_listen and rpma_conn_req_new. getaddrinfo (and librdmacm, which
// upstream uses) reads any text that strtoul takes whole as a port number and keeps its low 16
// bits: "70000" becomes 4464, "-1" 65535, "" 0. rpma refuses such ports (a deliberate difference
// from upstream, docs/tcp-provider.md); service names are left to the resolver.
#pragma once

namespace rpma {

// False, with the reason logged, for a port that would be read as a number but is not a plain
// decimal one from 0 to 65535: empty, or starting with a digit, a sign or a blank. Other text
// is a service name and passes.
bool port_ok(const char *port) noexcept;

}  // namespace rpma
